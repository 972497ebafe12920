export type { ArchivedMention, ArchivedPost, Page, RecordStatus, RecordStore, SearchHit, SearchQuery, SearchTerm } from './store.js';
