export type { ArchivedMention, ArchivedPost, Page, RecordStatus, RecordStore, SearchHit, SearchQuery, SearchTerm } from './store.js';
export { type Database, openDatabase, openPGlite, openPostgres, type Queryable, redactUrl, STATEMENT_TIMEOUT_MS } from './db.js';
export { type Migration, migrate, MIGRATIONS } from './migrations.js';
export { openRecordStore, type OpenRecordStoreOptions, PAGE_MAX, SqlRecordStore, type SqlRecordStoreOptions } from './store-sql.js';
export { parseSearchQuery, QUERY_EXPECTED } from './search/query.js';
export { SNIPPET_LENGTH } from './search/snippet.js';
