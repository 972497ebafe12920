import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';
import { viteSingleFile } from 'vite-plugin-singlefile';

/**
 * The room as an MCP App (docs/decisions.md §48): `room.html`, its script and its styles built into
 * ONE self-contained HTML file, `dist/app/room.html`, which edge serves as the `ui://` resource's text.
 */
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  logLevel: 'warn',
  plugins: [viteSingleFile()],
  // One copy of each, edge's own: ext-apps is hoisted beside the inspector's older MCP packages, and
  // would otherwise bring a second @modelcontextprotocol/core into the file.
  resolve: { dedupe: ['@modelcontextprotocol/core', '@modelcontextprotocol/client', 'zod'] },
  build: {
    outDir: fileURLToPath(new URL('../dist/app', import.meta.url)),
    emptyOutDir: true,
    target: 'es2022',
    rollupOptions: { input: fileURLToPath(new URL('room.html', import.meta.url)) },
  },
});
