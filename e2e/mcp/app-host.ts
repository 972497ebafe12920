/**
 * The host side of e2e/mcp/app.test.ts, run in the harness page: ext-apps' own AppBridge embeds the
 * room's view as an MCP host does (a sandboxed iframe under the CSP the resource declares), and
 * hands every tools/call of the view to the test (`hostCallTool`), which forwards it to our /mcp.
 */
import { AppBridge, PostMessageTransport, type McpUiHostContext, type McpUiResourceCsp } from '@modelcontextprotocol/ext-apps/app-bridge';
import type { CallToolRequest, CallToolResult, Tool } from '@modelcontextprotocol/client';

declare global {
  interface Window {
    /** Exposed by the test: the host's own call of a tool on the server, with its agent's token. */
    hostCallTool(params: CallToolRequest['params']): Promise<CallToolResult>;
    host: Host;
  }
}

export interface Host {
  open(view: { html: string; csp: McpUiResourceCsp | undefined; theme: 'light' | 'dark'; tool: Tool; input: Record<string, unknown> }): Promise<void>;
  result(result: CallToolResult): Promise<void>;
  theme(theme: 'light' | 'dark'): Promise<void>;
}

/** The policy a host puts on a view: nothing but inline code, and exactly the origins the resource names. */
function policy(csp: McpUiResourceCsp | undefined): string {
  const resources = (csp?.resourceDomains ?? []).join(' ');
  const connect = (csp?.connectDomains ?? []).join(' ') || "'none'";
  return [
    "default-src 'none'",
    `script-src 'unsafe-inline' ${resources}`.trim(),
    `style-src 'unsafe-inline' ${resources}`.trim(),
    `img-src data: ${resources}`.trim(),
    `font-src data: ${resources}`.trim(),
    `connect-src ${connect}`,
    "frame-src 'none'",
    "object-src 'none'",
    "base-uri 'none'",
  ].join('; ');
}

let bridge: AppBridge | undefined;

window.host = {
  async open({ html, csp, theme, tool, input }) {
    const iframe = document.createElement('iframe');
    // No allow-same-origin: the view runs in an opaque origin, as hosts run it.
    iframe.setAttribute('sandbox', 'allow-scripts allow-forms');
    iframe.title = 'Agent Room';
    iframe.style.cssText = 'width: 100%; height: 900px; border: 0';
    const meta = `<meta http-equiv="Content-Security-Policy" content="${policy(csp)}">`;
    iframe.srcdoc = html.replace(/<head>/i, `<head>${meta}`);
    const hostContext: McpUiHostContext = { theme, platform: 'web', displayMode: 'inline', toolInfo: { tool } };
    bridge = new AppBridge(null, { name: 'agent-room-test-host', version: '1.0.0' }, { serverTools: {}, openLinks: {} }, { hostContext });
    bridge.oncalltool = (params) => window.hostCallTool(params);
    const initialized = new Promise<void>((resolve) => {
      if (bridge) bridge.oninitialized = () => resolve();
    });
    document.body.append(iframe);
    const frame = iframe.contentWindow;
    if (frame === null) throw new Error('the iframe has no window');
    await bridge.connect(new PostMessageTransport(frame, frame));
    await initialized;
    await bridge.sendToolInput({ arguments: input });
  },
  async result(result) {
    if (!bridge) throw new Error('no view is open');
    await bridge.sendToolResult(result);
  },
  async theme(theme) {
    if (!bridge) throw new Error('no view is open');
    await bridge.sendHostContextChange({ theme });
  },
};
