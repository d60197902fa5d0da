// A small Markdown renderer for model output that builds DOM nodes only (createElement and text
// nodes; never innerHTML), so no text the model writes can become markup: `<script>` stays the
// eight characters it is. Supports fenced code, headings, lists, quotes, rules, paragraphs and the
// inline forms `code`, **bold**, *em*, ~~strike~~ and [links](https://...) (http, https and mailto
// only; others stay text).

const SAFE_URL = /^(https?:\/\/|mailto:)[^\s]*$/i;

function el(tag, className) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  return node;
}

// Inline spans, left to right: code first (nothing inside it is parsed), then links, then
// emphasis, whose contents are parsed again.
const INLINE =
  /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)|\[([^\]\n]+)\]\(([^()\s]+)\)|\*\*(?=\S)([\s\S]*?\S)\*\*|~~(?=\S)([\s\S]*?\S)~~|\*(?=[^\s*])([^*]*?[^\s*])\*|(?<![\w])_(?=[^\s_])([^_]*?[^\s_])_(?![\w])/g;

function renderInline(text, parent) {
  let last = 0;
  INLINE.lastIndex = 0;
  const matches = [...text.matchAll(INLINE)];
  for (const m of matches) {
    if (m.index > last) parent.append(document.createTextNode(text.slice(last, m.index)));
    last = m.index + m[0].length;
    if (m[1] !== undefined) {
      const code = el('code');
      code.textContent = m[2];
      parent.append(code);
    } else if (m[3] !== undefined) {
      if (SAFE_URL.test(m[4])) {
        const a = el('a');
        a.href = m[4];
        a.target = '_blank';
        a.rel = 'noopener noreferrer nofollow';
        renderInline(m[3], a);
        parent.append(a);
      } else {
        parent.append(document.createTextNode(m[0]));
      }
    } else {
      const tag = m[5] !== undefined ? 'strong' : m[6] !== undefined ? 'del' : 'em';
      const node = el(tag);
      renderInline(m[5] ?? m[6] ?? m[7] ?? m[8], node);
      parent.append(node);
    }
  }
  if (last < text.length) parent.append(document.createTextNode(text.slice(last)));
}

// Paragraph lines keep their line breaks.
function renderLines(lines, parent) {
  lines.forEach((line, i) => {
    if (i > 0) parent.append(el('br'));
    renderInline(line, parent);
  });
}

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)\s*$/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
const BULLET = /^ {0,3}[-*+]\s+(.*)$/;
const ORDERED = /^ {0,3}(\d{1,9})[.)]\s+(.*)$/;
const QUOTE = /^ {0,3}>\s?(.*)$/;

function isBlockStart(line) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || BULLET.test(line) ||
         ORDERED.test(line) || QUOTE.test(line);
}

// Returns a DocumentFragment for `source` (a string; anything else is shown as its String()).
export function renderMarkdown(source) {
  const fragment = document.createDocumentFragment();
  const lines = String(source ?? '').replace(/\r\n?/g, '\n').split('\n');
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (line.trim() === '') {
      ++i;
      continue;
    }
    let m;
    if ((m = FENCE.exec(line))) {
      const close = new RegExp(`^ {0,3}${m[1][0]}{${m[1].length},}\\s*$`);
      const body = [];
      ++i;
      while (i < lines.length && !close.test(lines[i])) body.push(lines[i++]);
      ++i;  // the closing fence (or the end: an unclosed fence runs to the end while streaming)
      const pre = el('pre');
      const code = el('code', m[2] ? `language-${m[2]}` : '');
      code.textContent = body.join('\n');
      pre.append(code);
      fragment.append(pre);
    } else if ((m = HEADING.exec(line))) {
      const h = el(`h${Math.min(6, m[1].length + 2)}`);
      renderInline(m[2], h);
      fragment.append(h);
      ++i;
    } else if (RULE.test(line)) {
      fragment.append(el('hr'));
      ++i;
    } else if (BULLET.test(line) || ORDERED.test(line)) {
      const ordered = !BULLET.test(line);
      const list = el(ordered ? 'ol' : 'ul');
      if (ordered) {
        const start = Number(ORDERED.exec(line)[1]);
        if (start !== 1) list.start = start;
      }
      const pattern = ordered ? ORDERED : BULLET;
      while (i < lines.length && (m = pattern.exec(lines[i]))) {
        const item = el('li');
        const itemLines = [ordered ? m[2] : m[1]];
        ++i;
        // Indented continuation lines belong to the item.
        while (i < lines.length && /^\s{2,}\S/.test(lines[i]) && !pattern.test(lines[i])) {
          itemLines.push(lines[i++].trim());
        }
        renderLines(itemLines, item);
        list.append(item);
      }
      fragment.append(list);
    } else if (QUOTE.test(line)) {
      const quote = el('blockquote');
      const quoted = [];
      while (i < lines.length && (m = QUOTE.exec(lines[i]))) {
        quoted.push(m[1]);
        ++i;
      }
      quote.append(renderMarkdown(quoted.join('\n')));
      fragment.append(quote);
    } else {
      const paragraph = [];
      while (i < lines.length && lines[i].trim() !== '' && (paragraph.length === 0 || !isBlockStart(lines[i]))) {
        paragraph.push(lines[i++]);
      }
      const p = el('p');
      renderLines(paragraph, p);
      fragment.append(p);
    }
  }
  return fragment;
}
