// `npm run build` of this workspace runs this after tsc: dist/pglite-template.tar.gz (see pglite-template.ts).
import { makePGliteTemplate } from './pglite-template.js';

await makePGliteTemplate();
