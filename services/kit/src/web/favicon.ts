import { crc32, deflateSync } from 'node:zlib';

/**
 * The room's mark, a speech bubble on an indigo tile, drawn once as shapes on a 32-unit square:
 * the SVG favicon is written from them, and so is the `/favicon.ico` (PNG images in an ICO
 * container) that browsers ask for when a document links no icon (docs/decisions.md §23).
 */
type Shape =
  | { kind: 'rect'; x: number; y: number; w: number; h: number; r: number; fill: string }
  | { kind: 'triangle'; points: [number, number][]; fill: string }
  | { kind: 'circle'; cx: number; cy: number; r: number; fill: string };

const ACCENT = '#4f46e5';
const PAPER = '#ffffff';

const SHAPES: readonly Shape[] = [
  { kind: 'rect', x: 0, y: 0, w: 32, h: 32, r: 7, fill: ACCENT },
  { kind: 'rect', x: 6, y: 7, w: 20, h: 14, r: 4, fill: PAPER },
  {
    kind: 'triangle',
    points: [
      [9, 20],
      [9, 26],
      [15, 20],
    ],
    fill: PAPER,
  },
  { kind: 'circle', cx: 11, cy: 14, r: 1.9, fill: ACCENT },
  { kind: 'circle', cx: 16, cy: 14, r: 1.9, fill: ACCENT },
  { kind: 'circle', cx: 21, cy: 14, r: 1.9, fill: ACCENT },
];

function svgOf(shape: Shape): string {
  switch (shape.kind) {
    case 'rect':
      return `<rect x="${shape.x}" y="${shape.y}" width="${shape.w}" height="${shape.h}" rx="${shape.r}" fill="${shape.fill}"/>`;
    case 'triangle':
      return `<path d="M${shape.points.map(([x, y]) => `${x} ${y}`).join('L')}Z" fill="${shape.fill}"/>`;
    case 'circle':
      return `<circle cx="${shape.cx}" cy="${shape.cy}" r="${shape.r}" fill="${shape.fill}"/>`;
  }
}

/** `{site_url}/favicon.svg`, linked from every page. */
export const FAVICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">${SHAPES.map(svgOf).join('')}</svg>\n`;

function covers(shape: Shape, x: number, y: number): boolean {
  switch (shape.kind) {
    case 'rect': {
      if (x < shape.x || y < shape.y || x > shape.x + shape.w || y > shape.y + shape.h) return false;
      // Inside the rectangle; in a corner square, only within the corner's circle.
      const cx = Math.min(Math.max(x, shape.x + shape.r), shape.x + shape.w - shape.r);
      const cy = Math.min(Math.max(y, shape.y + shape.r), shape.y + shape.h - shape.r);
      return (x - cx) ** 2 + (y - cy) ** 2 <= shape.r ** 2;
    }
    case 'triangle': {
      const [a, b, c] = shape.points as [[number, number], [number, number], [number, number]];
      const side = (p: [number, number], q: [number, number]): number => (q[0] - p[0]) * (y - p[1]) - (q[1] - p[1]) * (x - p[0]);
      const d1 = side(a, b);
      const d2 = side(b, c);
      const d3 = side(c, a);
      return !((d1 < 0 || d2 < 0 || d3 < 0) && (d1 > 0 || d2 > 0 || d3 > 0));
    }
    case 'circle':
      return (x - shape.cx) ** 2 + (y - shape.cy) ** 2 <= shape.r ** 2;
  }
}

function rgb(hex: string): [number, number, number] {
  return [Number.parseInt(hex.slice(1, 3), 16), Number.parseInt(hex.slice(3, 5), 16), Number.parseInt(hex.slice(5, 7), 16)];
}

/** RGBA pixels of the mark at `size` px, each pixel the average of 4 × 4 samples (anti-aliased edges). */
function raster(size: number): Buffer {
  const pixels = Buffer.alloc(size * size * 4);
  const samples = 4;
  const scale = 32 / size;
  for (let py = 0; py < size; py += 1) {
    for (let px = 0; px < size; px += 1) {
      let r = 0;
      let g = 0;
      let b = 0;
      let a = 0;
      for (let sy = 0; sy < samples; sy += 1) {
        for (let sx = 0; sx < samples; sx += 1) {
          const x = (px + (sx + 0.5) / samples) * scale;
          const y = (py + (sy + 0.5) / samples) * scale;
          const top = SHAPES.findLast((shape) => covers(shape, x, y));
          if (top === undefined) continue;
          const [cr, cg, cb] = rgb(top.fill);
          r += cr;
          g += cg;
          b += cb;
          a += 1;
        }
      }
      const at = (py * size + px) * 4;
      // Colours averaged over the covered samples only (straight alpha), coverage as alpha.
      pixels[at] = a === 0 ? 0 : Math.round(r / a);
      pixels[at + 1] = a === 0 ? 0 : Math.round(g / a);
      pixels[at + 2] = a === 0 ? 0 : Math.round(b / a);
      pixels[at + 3] = Math.round((a / (samples * samples)) * 255);
    }
  }
  return pixels;
}

function chunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'ascii');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
  return Buffer.concat([head, data, crc]);
}

/** A PNG of the mark (RGBA, 8 bits a channel, no filtering). */
function png(size: number): Buffer {
  const pixels = raster(size);
  const header = Buffer.alloc(13);
  header.writeUInt32BE(size, 0);
  header.writeUInt32BE(size, 4);
  header[8] = 8;
  header[9] = 6;
  const rows = Buffer.alloc(size * (size * 4 + 1));
  for (let y = 0; y < size; y += 1) pixels.copy(rows, y * (size * 4 + 1) + 1, y * size * 4, (y + 1) * size * 4);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(rows)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** `{site_url}/favicon.ico`: the mark at 16, 32 and 48 px, each a PNG in the ICO container. */
export function faviconIco(): Buffer {
  const images = [16, 32, 48].map((size) => ({ size, data: png(size) }));
  const head = Buffer.alloc(6 + images.length * 16);
  head.writeUInt16LE(1, 2);
  head.writeUInt16LE(images.length, 4);
  let offset = head.length;
  images.forEach(({ size, data }, i) => {
    const entry = 6 + i * 16;
    head[entry] = size;
    head[entry + 1] = size;
    head.writeUInt16LE(1, entry + 4);
    head.writeUInt16LE(32, entry + 6);
    head.writeUInt32LE(data.length, entry + 8);
    head.writeUInt32LE(offset, entry + 12);
    offset += data.length;
  });
  return Buffer.concat([head, ...images.map((image) => image.data)]);
}
