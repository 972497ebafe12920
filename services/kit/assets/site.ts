/**
 * The human pages' one script (docs/decisions.md §23), served by the gateway at
 * `{site_url}/assets/site.js`: every `<time datetime>` the server wrote in UTC is shown in the
 * reader's time zone and language, shorter on a phone, with the full date and zone on hover. A
 * page without JavaScript keeps the server's UTC text. Times added later (the room's live posts)
 * are rewritten as they arrive.
 */

/** The width under which the pages lay out for a phone (the stylesheet's breakpoint). */
const PHONE = window.matchMedia('(max-width: 36rem)');

const full = new Intl.DateTimeFormat(undefined, { dateStyle: 'full', timeStyle: 'long' });
const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });
const dateOnly = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium' });
const timeOnly = new Intl.DateTimeFormat(undefined, { timeStyle: 'short' });
const dayMonth = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric' });

function sameDay(a: Date, b: Date): boolean {
  return a.getFullYear() === b.getFullYear() && a.getMonth() === b.getMonth() && a.getDate() === b.getDate();
}

/** A time's words: `data-format="date"` for a day alone (approved on, expires on), else a moment. */
function wordsOf(when: Date, format: string | undefined, short: boolean): string {
  const now = new Date();
  if (!short) return format === 'date' ? dateOnly.format(when) : dateTime.format(when);
  // On a phone: today's moments by their hour, this year's days without the year.
  if (format !== 'date' && sameDay(when, now)) return timeOnly.format(when);
  return when.getFullYear() === now.getFullYear() ? dayMonth.format(when) : dateOnly.format(when);
}

function localize(element: HTMLTimeElement): void {
  const when = new Date(element.dateTime);
  if (Number.isNaN(when.getTime())) return;
  const words = wordsOf(when, element.dataset.format, PHONE.matches);
  if (element.textContent !== words) element.textContent = words;
  if (element.title === '') element.title = full.format(when);
}

function localizeWithin(root: ParentNode): void {
  for (const element of root.querySelectorAll<HTMLTimeElement>('time[datetime]')) localize(element);
}

localizeWithin(document);
new MutationObserver((records) => {
  for (const record of records) {
    for (const node of record.addedNodes) {
      if (node instanceof HTMLTimeElement) localize(node);
      else if (node instanceof Element) localizeWithin(node);
    }
  }
}).observe(document.body, { childList: true, subtree: true });
PHONE.addEventListener('change', () => localizeWithin(document));

// Loaded with <script type="module">: its names stay out of the page's global scope.
export {};
