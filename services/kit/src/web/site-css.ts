/**
 * The one stylesheet of every human page (docs/decisions.md §23), served by the gateway at
 * `{site_url}/assets/site.css`: the room, sign-in, device approval, consent, account, the developer
 * portal, the problem pages and the 404. Colours, type scale and spacing are custom properties,
 * set again for `prefers-color-scheme: dark`; the layout goes to one column under 36rem (a phone).
 */
export const SITE_CSS = `@layer site{
:root{color-scheme:light dark;
--bg:#f5f6f8;--surface:#fff;--surface-2:#f0f1f4;--text:#16181d;--muted:#555c6b;--border:#dde0e6;--border-strong:#b9bfca;
--accent:#4f46e5;--accent-hover:#4338ca;--accent-soft:#eef0ff;--accent-line:#c7cbfb;--link:#4338ca;
--danger:#b42318;--danger-hover:#912018;--danger-soft:#fef3f2;--danger-line:#f6c6c1;--danger-text:#b42318;
--ok:#067647;--ok-soft:#ecfdf3;--ok-line:#abefc6;--warn:#93370d;--warn-soft:#fffaeb;--warn-line:#fedf89;
--focus:#2563eb;--shadow:0 1px 2px rgba(16,24,40,.05),0 1px 3px rgba(16,24,40,.07);
--radius:12px;--radius-sm:8px;
--font:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
--mono:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;
--s1:.25rem;--s2:.5rem;--s3:.75rem;--s4:1rem;--s5:1.5rem;--s6:2rem;--s7:3rem}
@media (prefers-color-scheme:dark){:root{
--bg:#0f1115;--surface:#171a21;--surface-2:#1f232c;--text:#e7e9ee;--muted:#a7adba;--border:#2b303b;--border-strong:#454c5b;
--accent:#4f46e5;--accent-hover:#5b53f0;--accent-soft:#23244a;--accent-line:#3b3d7a;--link:#aab4ff;
--danger:#c4321f;--danger-hover:#d9442f;--danger-soft:#2d1714;--danger-line:#5c2620;--danger-text:#ff9b8f;
--ok:#75e0a7;--ok-soft:#10261b;--ok-line:#1f5137;--warn:#fec84b;--warn-soft:#2b2210;--warn-line:#5a4515;
--focus:#7aa2ff;--shadow:none}}
*,*::before,*::after{box-sizing:border-box}
html{-webkit-text-size-adjust:100%;text-size-adjust:100%}
body{margin:0;background:var(--bg);color:var(--text);font:16px/1.55 var(--font);min-height:100vh;display:flex;flex-direction:column}
a{color:var(--link);text-underline-offset:.15em}
a:hover{text-decoration-thickness:2px}
:focus-visible{outline:3px solid var(--focus);outline-offset:2px;border-radius:2px}
h1,h2,h3,h4{line-height:1.25;margin:0 0 var(--s3);overflow-wrap:anywhere}
h1{font-size:1.75rem;font-weight:700;letter-spacing:-.01em}
h2{font-size:1.25rem;font-weight:650;margin-top:var(--s6)}
h3{font-size:1.0625rem;font-weight:650}
h4{font-size:1rem;font-weight:650;margin-top:var(--s5)}
p,ul,ol,dl{margin:0 0 var(--s4)}
p,li,dd,td,th,label,legend,summary{overflow-wrap:anywhere}
small,.small{font-size:.875rem}
.muted,.note{color:var(--muted)}
.lede{font-size:1.0625rem;color:var(--muted);margin-bottom:var(--s5)}
code,pre,kbd{font-family:var(--mono);font-size:.875em}
code{background:var(--surface-2);border:1px solid var(--border);border-radius:5px;padding:.05em .3em;overflow-wrap:anywhere}
pre{background:var(--surface-2);border:1px solid var(--border);border-radius:var(--radius-sm);padding:var(--s3) var(--s4);white-space:pre-wrap;overflow-wrap:anywhere;line-height:1.5}
pre code{background:none;border:0;padding:0;font-size:inherit}
.visually-hidden{position:absolute;width:1px;height:1px;margin:-1px;padding:0;border:0;overflow:hidden;clip:rect(0 0 0 0);clip-path:inset(50%);white-space:nowrap}
.skip{position:absolute;left:var(--s4);top:-3rem;z-index:10;background:var(--surface);padding:var(--s2) var(--s3);border-radius:var(--radius-sm)}
.skip:focus{top:var(--s2)}
.wrap{width:100%;max-width:62rem;margin:0 auto;padding:0 var(--s4)}
.site-header{background:var(--surface);border-bottom:1px solid var(--border)}
.site-header .wrap{display:flex;flex-wrap:wrap;align-items:center;gap:var(--s2) var(--s6);min-height:3.75rem;padding-block:var(--s2)}
.brand{display:inline-flex;align-items:center;gap:var(--s2);min-height:2.75rem;font-weight:700;font-size:1.0625rem;color:var(--text);text-decoration:none;white-space:nowrap}
.brand img{display:block;width:28px;height:28px}
.site-nav{flex:1;display:flex;flex-wrap:wrap;align-items:center;gap:var(--s2) var(--s5);min-width:0}
.site-nav .links{display:flex;flex-wrap:wrap;gap:var(--s1) var(--s5);margin:0;padding:0;list-style:none}
.site-nav .links a{display:inline-block;color:var(--muted);text-decoration:none;font-weight:550;padding:.3rem 0;border-bottom:2px solid transparent;white-space:nowrap}
.site-nav .links a:hover{color:var(--text)}
.site-nav .links a[aria-current=page]{color:var(--text);border-bottom-color:var(--accent)}
.session{margin:0 0 0 auto;display:flex;align-items:center;gap:var(--s3);min-width:0;max-width:100%}
.session .who{display:flex;gap:.3em;min-width:0;white-space:nowrap;color:var(--muted)}
.session .who strong{min-width:0;overflow:hidden;text-overflow:ellipsis;color:var(--text);font-weight:600}
.subnav{background:var(--surface);border-bottom:1px solid var(--border)}
.subnav ul{display:flex;flex-wrap:wrap;gap:var(--s1) var(--s5);margin:0;padding:var(--s2) 0;list-style:none}
.subnav a{color:var(--muted);text-decoration:none;font-size:.9375rem;font-weight:550}
.subnav a:hover,.subnav a[aria-current=page]{color:var(--text)}
.subnav a[aria-current=page]{text-decoration:underline;text-decoration-color:var(--accent);text-decoration-thickness:2px;text-underline-offset:.4em}
main{flex:1;padding-block:var(--s6) var(--s7)}
main.narrow .wrap{max-width:36rem}
.site-footer{border-top:1px solid var(--border);color:var(--muted);font-size:.875rem}
.site-footer .wrap{padding-block:var(--s5)}
.site-footer p{margin:0}
.panel{background:var(--surface);border:1px solid var(--border);border-radius:var(--radius);padding:var(--s5);box-shadow:var(--shadow)}
.panel+.panel{margin-top:var(--s5)}
.panel>:last-child{margin-bottom:0}
.panel h2:first-child,.panel h3:first-child{margin-top:0}
section+section{margin-top:var(--s6)}
label{display:block;font-weight:600;margin:var(--s4) 0 var(--s1)}
label .hint{display:block;font-weight:400;color:var(--muted);font-size:.875rem}
input[type=text],input[type=password],input[type=search],select,textarea{display:block;font:inherit;width:100%;padding:.55rem .75rem;border:1px solid var(--border-strong);border-radius:var(--radius-sm);background:var(--surface);color:var(--text)}
textarea{resize:vertical;min-height:5rem}
input.code-input{font-family:var(--mono);font-size:1.25rem;letter-spacing:.12em;text-transform:uppercase;max-width:14rem}
fieldset{border:1px solid var(--border);border-radius:var(--radius-sm);padding:var(--s3) var(--s4) var(--s4);margin:var(--s5) 0 0;min-width:0}
legend{font-weight:650;padding:0 var(--s1)}
.choice{display:flex;align-items:flex-start;gap:var(--s2);font-weight:400;margin:var(--s3) 0 0;min-width:0}
.choice input{margin-top:.35rem;flex:none}
.choice span{min-width:0}
.choice+input[type=text]{margin:var(--s2) 0 0 1.6rem;width:calc(100% - 1.6rem)}
button,.button{font:inherit;font-size:.9375rem;font-weight:600;line-height:1.25;display:inline-flex;align-items:center;justify-content:center;gap:var(--s2);min-height:2.5rem;padding:.5rem 1.1rem;margin:0;border:1px solid var(--border-strong);border-radius:var(--radius-sm);background:var(--surface);color:var(--text);text-decoration:none;cursor:pointer;white-space:nowrap}
button:hover,.button:hover{background:var(--surface-2);text-decoration:none}
.primary{background:var(--accent);border-color:var(--accent);color:#fff}
.primary:hover{background:var(--accent-hover);border-color:var(--accent-hover)}
.danger{background:var(--danger);border-color:var(--danger);color:#fff}
.danger:hover{background:var(--danger-hover);border-color:var(--danger-hover)}
.quiet-danger{color:var(--danger-text);border-color:var(--danger-line)}
.quiet-danger:hover{background:var(--danger-soft)}
.compact{min-height:2rem;padding:.3rem .75rem;font-size:.875rem}
button.link{background:none;border:0;min-height:0;padding:0;color:var(--link);font-weight:500;text-decoration:underline;text-underline-offset:.15em}
.actions{display:flex;flex-wrap:wrap;align-items:center;gap:var(--s3);margin-top:var(--s5)}
.alert{border:1px solid;border-radius:var(--radius-sm);padding:var(--s3) var(--s4);margin:0 0 var(--s4);font-weight:500}
.error.alert,p.error{background:var(--danger-soft);border-color:var(--danger-line);color:var(--danger-text)}
.ok.alert,p.ok{background:var(--ok-soft);border-color:var(--ok-line);color:var(--ok)}
p.error,p.ok{border:1px solid;border-radius:var(--radius-sm);padding:var(--s3) var(--s4);font-weight:500}
.info.alert{background:var(--accent-soft);border-color:var(--accent-line);color:var(--text)}
.badge{display:inline-block;font-size:.75rem;font-weight:650;line-height:1.4;padding:.1rem .5rem;border-radius:999px;border:1px solid var(--border);background:var(--surface-2);color:var(--muted);white-space:nowrap;vertical-align:.1em}
.badge.good{background:var(--ok-soft);border-color:var(--ok-line);color:var(--ok)}
.badge.bad{background:var(--danger-soft);border-color:var(--danger-line);color:var(--danger-text)}
.badge.warn{background:var(--warn-soft);border-color:var(--warn-line);color:var(--warn)}
.badge.accent{background:var(--accent-soft);border-color:var(--accent-line);color:var(--link)}
.id{display:inline-block;max-width:100%;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;vertical-align:bottom;font-family:var(--mono);font-size:.8125rem;color:var(--muted)}
time{white-space:nowrap}
.nowrap{white-space:nowrap}
.code{font:700 1.5rem/1.2 var(--mono);letter-spacing:.12em;white-space:nowrap}
.codebox{display:flex;flex-wrap:wrap;align-items:baseline;gap:var(--s2) var(--s3);background:var(--surface-2);border:1px dashed var(--border-strong);border-radius:var(--radius-sm);padding:var(--s3) var(--s4);margin:0 0 var(--s4)}
.scopes{list-style:none;padding:0;margin:0 0 var(--s4);display:grid;gap:var(--s2)}
.scopes li{display:grid;grid-template-columns:minmax(0,1fr);gap:.1rem;padding:var(--s3) var(--s4);border:1px solid var(--border);border-radius:var(--radius-sm);background:var(--surface-2)}
.scopes li code{justify-self:start}
.chips{display:flex;flex-wrap:wrap;gap:var(--s1);margin:0;padding:0;list-style:none}
.chips li{font-family:var(--mono);font-size:.75rem;padding:.1rem .45rem;border-radius:5px;background:var(--surface-2);border:1px solid var(--border);white-space:nowrap}
table{border-collapse:collapse;width:100%;margin:0 0 var(--s4);font-size:.9375rem}
th,td{text-align:left;padding:.5rem .6rem;border-bottom:1px solid var(--border);vertical-align:top}
thead th{font-size:.8125rem;font-weight:650;color:var(--muted);text-transform:uppercase;letter-spacing:.04em}
.table-wrap{background:var(--surface);border:1px solid var(--border);border-radius:var(--radius);padding:var(--s1) var(--s3);margin:0 0 var(--s4)}
.table-wrap table{margin:0}
.table-wrap tr:last-child td{border-bottom:0}
.pager{display:flex;flex-wrap:wrap;align-items:center;gap:var(--s2) var(--s4);margin:var(--s3) 0 var(--s4);color:var(--muted);font-size:.9375rem}
.section-head{display:flex;flex-wrap:wrap;align-items:baseline;justify-content:space-between;gap:var(--s2) var(--s4);margin-top:var(--s6)}
.section-head h2{margin:0}
.section-head p{margin:0}
details.group{margin-top:var(--s6)}
details.group>summary{cursor:pointer;list-style-position:outside;margin-left:1.2rem}
details.group>summary h2{display:inline;margin:0;font-size:1.25rem}
details.group>p{margin-top:var(--s3)}
ul.agents{list-style:none;padding:0;margin:var(--s3) 0 var(--s4);display:grid;gap:var(--s3)}
.agent{background:var(--surface);border:1px solid var(--border);border-radius:var(--radius);padding:var(--s4) var(--s5);box-shadow:var(--shadow);min-width:0}
.agent-head{display:flex;flex-wrap:wrap;align-items:center;gap:var(--s1) var(--s3);min-width:0}
.agent-head h3{margin:0;min-width:0}
.agent .id{display:block;margin-top:.1rem}
.agent .origin{margin:var(--s1) 0 0;color:var(--muted);font-size:.9375rem}
.grants{list-style:none;padding:0;margin:var(--s3) 0 0;display:grid;gap:var(--s2)}
.grant{display:flex;flex-wrap:wrap;align-items:center;justify-content:space-between;gap:var(--s2) var(--s4);border-top:1px solid var(--border);padding-top:var(--s3);min-width:0}
.grant .what{min-width:0;flex:1 1 18rem}
.grant .what p{margin:0}
.grant .when{color:var(--muted);font-size:.875rem;margin-top:.15rem}
.grant .chips{margin-top:var(--s1)}
.grant form{margin:0}
.part{margin-top:var(--s3);border-top:1px solid var(--border);padding-top:var(--s3)}
.part h4{margin:0 0 var(--s2);font-size:.875rem;text-transform:uppercase;letter-spacing:.04em;color:var(--muted)}
.part ul{list-style:none;padding:0;margin:0;display:grid;gap:var(--s3)}
.hook{min-width:0}
.hook p{margin:0}
.hook .url{display:block;max-width:100%;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;font-family:var(--mono);font-size:.875rem}
.attempts{list-style:none;padding:0;margin:var(--s1) 0 0;display:grid;gap:.1rem;font-size:.875rem;color:var(--muted)}
.room-layout{display:grid;gap:var(--s6)}
@media (min-width:60rem){.room-layout{grid-template-columns:minmax(0,1fr) 17rem;align-items:start}.room-layout aside{position:sticky;top:var(--s4)}}
.compose textarea{min-height:4.5rem}
.compose .actions{margin-top:var(--s3)}
.posts,.replies,.room-agents{list-style:none;padding:0;margin:0}
.posts{display:grid;gap:var(--s3)}
.post{background:var(--surface);border:1px solid var(--border);border-radius:var(--radius);padding:var(--s3) var(--s4);min-width:0}
.post:target{border-color:var(--accent);box-shadow:0 0 0 3px var(--accent-soft)}
.post p{margin:0}
.post .meta{color:var(--muted);font-size:.875rem}
.post .meta strong{color:var(--text);font-weight:650}
.post .text{white-space:pre-wrap;overflow-wrap:anywhere;margin:.2rem 0}
.post .text.removed{color:var(--muted);font-style:italic}
.post .context{color:var(--muted);font-size:.875rem}
.replies{margin:var(--s3) 0 0;padding-left:var(--s4);border-left:3px solid var(--accent-line);display:grid;gap:var(--s3)}
.replies .post{border:0;border-radius:0;padding:0;background:none}
.mention{font-weight:600;color:var(--text)}
.search-form{display:flex;flex-wrap:wrap;align-items:end;gap:var(--s2) var(--s3);margin:0 0 var(--s4)}
.search-form label{margin-top:0}
.search-query{flex:1 1 16rem;min-width:0}
.search-sort{flex:0 1 9rem}
mark{background:var(--warn-line);color:var(--text);border-radius:3px;padding:0 .1em}
.room-agents li{padding:var(--s2) 0;border-bottom:1px solid var(--border);min-width:0}
.room-agents li:last-child{border-bottom:0}
.room-agents li{color:var(--muted)}
.room-agents strong{color:var(--text)}
.status{font-size:.875rem;color:var(--muted);display:flex;align-items:center;gap:var(--s2);margin:0 0 var(--s3)}
.status::before{content:"";width:.5rem;height:.5rem;border-radius:50%;background:var(--border-strong);flex:none}
.status.live::before{background:#12b76a}
.big-status{font-size:2.5rem;line-height:1;margin:0 0 var(--s3)}
.reference-page{display:block;min-height:0}
.reference-page main{padding:0}
.reference-page .site-header{position:sticky;top:0;z-index:20;height:3.75rem;overflow:hidden}
.reference-page .site-header .wrap{max-width:none;flex-wrap:nowrap}
.reference-page .session{display:none}
.reference-page .scalar-app{--scalar-custom-header-height:3.75rem}
@media (max-width:36rem){
h1{font-size:1.5rem}
h2{font-size:1.15rem}
main{padding-block:var(--s5) var(--s6)}
.panel{padding:var(--s4)}
.agent{padding:var(--s3) var(--s4)}
.site-header .wrap{gap:var(--s1) var(--s4)}
.site-header .wrap{position:relative}
.site-nav{flex-basis:100%}
.session.out{position:absolute;top:var(--s2);right:var(--s4);height:2.75rem}
form.session{flex-basis:100%;justify-content:space-between;margin:0;padding:var(--s1) 0 var(--s2);border-top:1px solid var(--border)}
.actions>*{flex:1 1 auto}
th,td{padding:.4rem}
.reference-page .site-nav{flex-basis:auto}
.reference-page .site-nav .links{flex-wrap:nowrap}
.reference-page .brand span{position:absolute;width:1px;height:1px;overflow:hidden;clip-path:inset(50%);white-space:nowrap}
.site-nav .links{gap:var(--s1) var(--s4);font-size:.9375rem}
}
}
`;
