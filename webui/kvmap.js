// The KV block map: one cell per block of the pool on a canvas, coloured by state (free,
// cached-free shaded by LRU rank, in use by owner), shared blocks marked with their reference
// count, a tooltip per cell (owners, positions, hits) and the pool's numbers beside it.
// Snapshots come from /v1/kv-map/stream (src/server/kv_map.h documents the shape).

const PALETTE = [
  '#1f77b4', '#e8710a', '#2ca02c', '#d62728', '#17becf', '#bcbd22',
  '#e377c2', '#8c564b', '#3f51b5', '#009688', '#f9a825', '#6d4c41',
];

function hashString(text) {
  let h = 2166136261;
  for (let i = 0; i < text.length; ++i) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 16777619);
  }
  return h >>> 0;
}

function percent(part, whole) {
  return whole > 0 ? `${((100 * part) / whole).toFixed(1)}%` : '–';
}

// Decodes a snapshot's packed arrays into one entry per block (null for a free block).
export function decodeSnapshot(snapshot) {
  const n = snapshot.n_blocks;
  const blocks = new Array(n).fill(null);
  const cells = snapshot.cells;
  for (let k = 0; k + 4 < cells.length; k += 5) {
    blocks[cells[k]] = {
      refs: cells[k + 1], lru: cells[k + 2], chain: cells[k + 3], hits: cells[k + 4], uses: [],
    };
  }
  const uses = snapshot.uses;
  for (let k = 0; k + 2 < uses.length; k += 3) {
    const block = blocks[uses[k]];
    if (block) block.uses.push({ owner: uses[k + 1], logical: uses[k + 2] });
  }
  let used = 0, cached = 0, shared = 0;
  for (const b of blocks) {
    if (!b) continue;
    if (b.refs > 0) ++used; else ++cached;
    if (b.refs > 1) ++shared;
  }
  const lruLength = cached;
  return { n, blockSize: snapshot.block_size, blocks, owners: snapshot.owners, stats: snapshot.stats,
           used, cached, free: n - used - cached, shared, lruLength };
}

export class KvMapView {
  // `elements`: canvas, tooltip, legend, caption, and `stat(name)` giving a number's <dd>.
  // `describe(owner)` returns {key, label} for an owner of the snapshot (the page knows which
  // session is which conversation).
  constructor(elements, describe) {
    this.e = elements;
    this.describe = describe;
    this.map = null;
    this.snapshot = null;
    this.geometry = null;
    this.hover = -1;
    this.colours = new Map();  // owner key -> palette index
    const canvas = this.e.canvas;
    canvas.addEventListener('mousemove', (event) => this.onPointer(event));
    canvas.addEventListener('click', (event) => this.onPointer(event));
    canvas.addEventListener('mouseleave', () => this.hideTooltip());
  }

  update(snapshot) {
    this.snapshot = snapshot;
    this.map = decodeSnapshot(snapshot);
    this.updatedAt = new Date();
    this.renderNumbers();
    this.renderLegend();
    this.draw();
    if (this.hover >= 0) this.showTooltip(this.hover);
  }

  // Redraws with the current theme's colours.
  refresh() {
    if (!this.map) return;
    this.renderLegend();
    this.draw();
  }

  // A conversation keeps its colour while it is on the map; a new one takes the colour that the
  // owners on the map use least.
  ownerColour(index) {
    const owner = this.map.owners[index];
    if (!owner || !owner.mine) return this.css('--cell-other');
    const key = this.describe(owner).key;
    if (!this.colours.has(key)) {
      const live = new Set(this.map.owners.filter((o) => o.mine).map((o) => this.describe(o).key));
      for (const k of [...this.colours.keys()]) if (!live.has(k)) this.colours.delete(k);
      const uses = PALETTE.map(() => 0);
      for (const c of this.colours.values()) ++uses[c];
      const start = hashString(key) % PALETTE.length;
      let best = start;
      for (let i = 0; i < PALETTE.length; ++i) {
        const c = (start + i) % PALETTE.length;
        if (uses[c] < uses[best]) best = c;
      }
      this.colours.set(key, best);
    }
    return PALETTE[this.colours.get(key)];
  }

  css(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  renderNumbers() {
    const m = this.map;
    const s = m.stats;
    const set = (name, value, text) => {
      const dd = this.e.stat(name);
      dd.dataset.value = String(value);
      dd.textContent = text ?? String(value);
    };
    set('used', m.used);
    set('cached', m.cached);
    set('free', m.free);
    set('shared', m.shared);
    set('utilisation', m.n ? m.used / m.n : 0, percent(m.used, m.n));
    set('hit-rate', s.prefix_queries_tokens ? s.prefix_hits_tokens / s.prefix_queries_tokens : 0,
        s.prefix_queries_tokens ? percent(s.prefix_hits_tokens, s.prefix_queries_tokens) : '–');
    set('running', s.running);
    set('waiting', s.waiting);
    set('sessions', s.sessions);
    set('preemptions', s.preemptions);
    const time = this.updatedAt.toLocaleTimeString();
    this.e.caption.textContent = `${m.n} blocks × ${m.blockSize} tokens · ${time}`;
  }

  renderLegend() {
    const legend = this.e.legend;
    legend.replaceChildren();
    const item = (colour, text, outline) => {
      const li = document.createElement('li');
      const swatch = document.createElement('span');
      swatch.className = 'swatch';
      swatch.style.background = colour;
      if (outline) swatch.style.borderColor = outline;
      li.append(swatch, document.createTextNode(text));
      legend.append(li);
      return li;
    };
    item(this.css('--cell-free'), `free (${this.map.free})`, this.css('--cell-free-edge'));
    item(this.css('--cell-cached'), `cached-free, darker = kept longer (${this.map.cached})`);
    // One entry per owner colour (a conversation's request and its session share one).
    const seen = new Map();
    this.map.owners.forEach((owner, index) => {
      const key = owner.mine ? this.describe(owner).key : 'other';
      const entry = seen.get(key) ?? { index, blocks: new Set(), owner };
      seen.set(key, entry);
    });
    this.map.blocks.forEach((b, id) => {
      if (!b) return;
      for (const use of b.uses) {
        const owner = this.map.owners[use.owner];
        const key = owner.mine ? this.describe(owner).key : 'other';
        seen.get(key)?.blocks.add(id);
      }
    });
    for (const [key, entry] of seen) {
      const label = key === 'other' ? 'other tenants' : this.describe(entry.owner).label;
      const li = item(this.ownerColour(entry.index), `${label} (${entry.blocks.size})`);
      li.dataset.owner = key;
    }
    if (this.map.shared > 0) {
      item('transparent', `white number n: shared by n (${this.map.shared})`);
    }
  }

  draw() {
    const canvas = this.e.canvas;
    const width = canvas.parentElement.clientWidth;
    if (!this.map || width === 0) return;
    const n = this.map.n;
    const gap = n > 4000 ? 1 : 2;
    const size = Math.max(3, Math.min(22, Math.floor(Math.sqrt((width * 380) / Math.max(1, n))) - gap));
    const cols = Math.max(1, Math.floor((width + gap) / (size + gap)));
    const rows = Math.ceil(n / cols);
    const height = rows * (size + gap);
    const ratio = window.devicePixelRatio || 1;
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
    canvas.style.height = `${height}px`;
    const g = canvas.getContext('2d');
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.clearRect(0, 0, width, height);
    this.geometry = { size, gap, cols };
    const free = this.css('--cell-free');
    const freeEdge = this.css('--cell-free-edge');
    const cached = this.css('--cell-cached');
    g.font = `600 ${Math.max(8, Math.floor(size * 0.62))}px system-ui, sans-serif`;
    g.textAlign = 'center';
    g.textBaseline = 'middle';
    for (let id = 0; id < n; ++id) {
      const x = (id % cols) * (size + gap);
      const y = Math.floor(id / cols) * (size + gap);
      const b = this.map.blocks[id];
      if (!b) {
        g.fillStyle = free;
        g.fillRect(x, y, size, size);
        if (size >= 6) {
          g.strokeStyle = freeEdge;
          g.lineWidth = 1;
          g.strokeRect(x + 0.5, y + 0.5, size - 1, size - 1);
        }
        continue;
      }
      if (b.refs === 0) {
        // LRU rank 0 is evicted next: palest.
        g.globalAlpha = 0.3 + (0.7 * (b.lru + 1)) / Math.max(1, this.map.lruLength);
        g.fillStyle = cached;
        g.fillRect(x, y, size, size);
        g.globalAlpha = 1;
        continue;
      }
      const owner = b.uses.length ? Math.min(...b.uses.map((u) => u.owner)) : -1;
      g.fillStyle = owner >= 0 ? this.ownerColour(owner) : cached;
      g.fillRect(x, y, size, size);
      if (b.refs > 1) {
        g.fillStyle = '#ffffff';
        if (size >= 11) {
          g.fillText(String(b.refs), x + size / 2, y + size / 2 + 0.5);
        } else {
          g.fillRect(x + size / 2 - 1, y + size / 2 - 1, 2, 2);
        }
      }
    }
    if (this.hover >= 0 && this.hover < n) {
      const x = (this.hover % cols) * (size + gap);
      const y = Math.floor(this.hover / cols) * (size + gap);
      g.strokeStyle = this.css('--fg');
      g.lineWidth = 2;
      g.strokeRect(x - 1, y - 1, size + 2, size + 2);
    }
  }

  cellAt(event) {
    if (!this.geometry || !this.map) return -1;
    const rect = this.e.canvas.getBoundingClientRect();
    const { size, gap, cols } = this.geometry;
    const col = Math.floor((event.clientX - rect.left) / (size + gap));
    const row = Math.floor((event.clientY - rect.top) / (size + gap));
    if (col < 0 || col >= cols || row < 0) return -1;
    const id = row * cols + col;
    return id < this.map.n ? id : -1;
  }

  onPointer(event) {
    const id = this.cellAt(event);
    if (id < 0) return this.hideTooltip();
    if (id !== this.hover) {
      this.hover = id;
      this.draw();
    }
    this.showTooltip(id);
  }

  // The tooltip's lines for block `id`.
  describeBlock(id) {
    const m = this.map;
    const b = m.blocks[id];
    const bs = m.blockSize;
    if (!b) return [`block ${id}: free`];
    const lines = [];
    if (b.refs === 0) {
      lines.push(`block ${id}: cached-free (LRU ${b.lru + 1} of ${m.lruLength}; 1 is evicted next)`);
      if (b.chain >= 0) lines.push(`positions ${b.chain * bs}–${b.chain * bs + bs - 1} of its prefix`);
    } else {
      lines.push(`block ${id}: in use, ${b.refs} reference${b.refs > 1 ? 's' : ''}`);
      for (const use of b.uses) {
        const owner = m.owners[use.owner];
        const start = use.logical * bs;
        const end = Math.min(start + bs, owner.tokens) - 1;
        const range = end >= start ? `positions ${start}–${end}` : `positions from ${start} (not yet written)`;
        const who = owner.mine ? this.describe(owner).label : `another tenant's ${owner.kind}`;
        lines.push(`${who}: ${range}`);
      }
    }
    if (b.chain >= 0) lines.push(`prefix-cache hits: ${b.hits}`);
    return lines;
  }

  showTooltip(id) {
    const tip = this.e.tooltip;
    tip.textContent = this.describeBlock(id).join('\n');
    tip.hidden = false;
    tip.style.left = '0px';  // measured at full width, then placed at that width
    tip.style.width = '';
    const width = Math.ceil(tip.getBoundingClientRect().width) + 1;
    tip.style.width = `${width}px`;
    const { size, gap, cols } = this.geometry;
    const box = this.e.canvas.parentElement.clientWidth;
    const x = (id % cols) * (size + gap);
    const y = Math.floor(id / cols) * (size + gap);
    const left = Math.min(Math.max(0, x - 20), Math.max(0, box - width));
    tip.style.left = `${left}px`;
    tip.style.top = `${y + size + 6}px`;
  }

  hideTooltip() {
    this.e.tooltip.hidden = true;
    if (this.hover >= 0) {
      this.hover = -1;
      this.draw();
    }
  }
}
