// The attention explorer: one offline page over one or more alignment exports of the same sentence
// pairs (nmt.alignment.explorer_page inlines this file and the data). Plain JavaScript, no framework.
//
// DATA = {title, sentences: [{src, tgt}] (words), reference: {kind, sure, possible} | null,
//         exports: [{name, attention, scores, links: {set: [[[i, j], ...] per sentence]},
//                    pieces: [{src, tgt}], matrices: {word: [...], piece: [...]}}]}
// A matrix is rows of integers, weight x 1000; rows are target words (pieces), columns source words
// (pieces). Links are (source word i, target word j).
"use strict";

const DATA = JSON.parse(document.getElementById("explorer-data").textContent);
const ROW = 26;  // pixel height of a row of the sentence list (rows are drawn lazily)
const state = {order: [], current: 0, view: "word", linkSet: null, threshold: 0, hover: null, row: null};
const $ = (id) => document.getElementById(id);
const key = (i, j) => i + "," + j;

// --- per-sentence measures ----------------------------------------------------------------------

function linkSet(links) { return new Set(links.map(([i, j]) => key(i, j))); }

function prfAer(links, sure, possible) {
  // precision, recall, AER (Och & Ney 2003) of one sentence; possible includes sure
  const a = linkSet(links), s = linkSet(sure), p = new Set([...linkSet(possible), ...s]);
  let as = 0, ap = 0;
  a.forEach((l) => { if (s.has(l)) as++; if (p.has(l)) ap++; });
  const total = a.size + s.size;
  return {precision: a.size ? ap / a.size : 0, recall: s.size ? as / s.size : 0, aer: total ? 1 - (as + ap) / total : 0};
}

function entropy(matrix) {
  // mean row entropy (nats) of a matrix of weights x 1000
  let sum = 0;
  matrix.forEach((row) => row.forEach((w) => { if (w > 0) { const p = w / 1000; sum -= p * Math.log(p); } }));
  return matrix.length ? sum / matrix.length : 0;
}

function disagreement(n) {
  // 1 - Jaccard of the first link sets of every pair of exports, averaged
  const sets = DATA.exports.map((e) => linkSet(e.links[Object.keys(e.links)[0]][n]));
  let sum = 0, pairs = 0;
  for (let a = 0; a < sets.length; a++) for (let b = a + 1; b < sets.length; b++) {
    const both = [...sets[a]].filter((l) => sets[b].has(l)).length;
    const either = new Set([...sets[a], ...sets[b]]).size;
    sum += either ? 1 - both / either : 0; pairs++;
  }
  return pairs ? sum / pairs : 0;
}

function diagonal(n) {
  // target word j linked to source word floor((j + 1/2) |src| / |tgt|), as the exports' baseline
  const {src, tgt} = DATA.sentences[n];
  return src.length ? tgt.map((_, j) => [Math.min(src.length - 1, Math.floor((j + 0.5) * src.length / tgt.length)), j]) : [];
}

const MEASURES = DATA.sentences.map((s, n) => {
  const first = DATA.exports[0];
  const links = first.links[Object.keys(first.links)[0]][n];
  const ref = DATA.reference;
  return {
    length: s.src.length + s.tgt.length,
    entropy: entropy(first.matrices.piece[n]),
    aer: ref ? prfAer(links, ref.sure[n], ref.possible[n]).aer : 0,
    disagreement: DATA.exports.length > 1 ? disagreement(n) : 0,
    text: (s.src.join(" ") + " ||| " + s.tgt.join(" ")).toLowerCase(),
  };
});

// --- the sentence list --------------------------------------------------------------------------

function applyOrder() {
  const words = $("search").value.trim().toLowerCase().split(/\s+/).filter(Boolean);
  const by = $("sort").value;
  let order = DATA.sentences.map((_, n) => n).filter((n) => words.every((w) => MEASURES[n].text.includes(w)));
  if (by !== "index") order.sort((a, b) => MEASURES[b][by] - MEASURES[a][by] || a - b);  // largest first
  state.order = order;
  $("count").textContent = order.length + " of " + DATA.sentences.length + " sentences";
  $("list-spacer").style.height = order.length * ROW + "px";
  drawList();
}

function drawList() {
  // only the rows in view (and a margin) exist in the page: 1,000s of sentences stay fast
  const box = $("list"), first = Math.max(0, Math.floor(box.scrollTop / ROW) - 10);
  const last = Math.min(state.order.length, first + Math.ceil(box.clientHeight / ROW) + 20);
  const rows = $("list-rows");
  rows.replaceChildren();
  rows.style.top = first * ROW + "px";
  const by = $("sort").value;
  for (let k = first; k < last; k++) {
    const n = state.order[k], row = document.createElement("div");
    row.className = "sentence" + (n === state.current ? " current" : "");
    row.dataset.n = n;
    const value = by === "index" ? "" : " · " + MEASURES[n][by].toFixed(by === "length" ? 0 : 3);
    row.textContent = "#" + n + value + "  " + DATA.sentences[n].src.join(" ");
    row.title = DATA.sentences[n].tgt.join(" ");
    row.onclick = () => choose(n);
    rows.appendChild(row);
  }
}

function choose(n) {
  state.current = n;
  state.row = null;
  const k = state.order.indexOf(n), box = $("list");
  if (k >= 0 && (k * ROW < box.scrollTop || (k + 1) * ROW > box.scrollTop + box.clientHeight)) box.scrollTop = k * ROW - box.clientHeight / 2;
  drawList();
  drawSentence();
}

// --- the matrices -------------------------------------------------------------------------------

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs) {
  const el = document.createElementNS(SVG, tag);
  Object.entries(attrs).forEach(([k, v]) => el.setAttribute(k, v));
  return el;
}

function overlays(e, n) {
  // the link sets to draw on export e's word grid: name -> Set of "i,j"
  const out = {};
  if ($("show-links").checked) out.links = linkSet(e.links[state.linkSet in e.links ? state.linkSet : Object.keys(e.links)[0]][n]);
  if ($("show-reference").checked && DATA.reference) {
    out.sure = linkSet(DATA.reference.sure[n]);
    out.possible = linkSet(DATA.reference.possible[n]);
  }
  if ($("show-diagonal").checked) out.diagonal = linkSet(diagonal(n));
  return out;
}

function drawPanel(e, n) {
  const word = state.view === "word";
  const cols = word ? DATA.sentences[n].src : e.pieces[n].src, rows = word ? DATA.sentences[n].tgt : e.pieces[n].tgt;
  const matrix = e.matrices[state.view][n];
  const left = 8 + 7 * Math.max(...rows.map((w) => w.length), 1), top = 8 + 6 * Math.max(...cols.map((w) => w.length), 1);
  // the exports side by side in the width there is, each cell 8-28 pixels
  const width = Math.max(300, $("panels").clientWidth / DATA.exports.length - 24) - left;
  const cell = Math.max(8, Math.min(28, Math.floor(width / Math.max(cols.length, 1)), Math.floor(640 / Math.max(rows.length, 1))));
  const panel = document.createElement("div");
  panel.className = "panel";
  const head = document.createElement("h3");
  head.textContent = e.name + " (" + e.attention + ")";
  panel.appendChild(head);
  const marks = word ? overlays(e, n) : {};
  if (word && DATA.reference) {
    const own = e.links[state.linkSet in e.links ? state.linkSet : Object.keys(e.links)[0]][n];
    const s = prfAer(own, DATA.reference.sure[n], DATA.reference.possible[n]);
    const line = document.createElement("p");
    line.className = "sentence-scores";
    line.textContent = `precision ${s.precision.toFixed(3)} · recall ${s.recall.toFixed(3)} · AER ${s.aer.toFixed(3)}`;
    line.title = "this sentence's links against " + (DATA.reference.kind === "gold" ? "gold" : "the aligner's links, not gold");
    panel.appendChild(line);
  }
  const grid = svg("svg", {width: left + cols.length * cell + 4, height: top + rows.length * cell + 4, class: "grid"});
  cols.forEach((w, i) => {
    const t = svg("text", {x: left + i * cell + cell / 2, y: top - 4, class: "src-word", "data-i": i,
      transform: `rotate(-60 ${left + i * cell + cell / 2} ${top - 4})`});
    t.textContent = w;
    grid.appendChild(t);
  });
  rows.forEach((w, j) => {
    const t = svg("text", {x: left - 4, y: top + j * cell + cell * 0.7, class: "tgt-word", "data-j": j, "text-anchor": "end"});
    t.textContent = w;
    t.onclick = () => { state.row = state.row === j ? null : j; drawSentence(); };
    grid.appendChild(t);
  });
  rows.forEach((_, j) => cols.forEach((_, i) => {
    const w = (matrix[j] || [])[i] || 0;
    const rect = svg("rect", {x: left + i * cell, y: top + j * cell, width: cell - 1, height: cell - 1, class: "cell",
      "data-i": i, "data-j": j, "data-w": w, fill: `rgba(24, 70, 160, ${w / 1000})`});
    rect.onmouseenter = () => hover(grid, i, j, w, cols[i], rows[j]);
    rect.onmouseleave = () => hover(grid, null);
    grid.appendChild(rect);
    const k = key(i, j), cx = left + i * cell + cell / 2 - 0.5, cy = top + j * cell + cell / 2 - 0.5, at = {"data-i": i, "data-j": j};
    const square = {...at, x: left + i * cell + 1, y: top + j * cell + 1, width: cell - 3, height: cell - 3};
    if (marks.sure && marks.sure.has(k)) grid.appendChild(svg("rect", {...square, class: "mark-sure"}));
    else if (marks.possible && marks.possible.has(k)) grid.appendChild(svg("rect", {...square, class: "mark-possible"}));
    if (marks.links && marks.links.has(k)) grid.appendChild(svg("circle", {...at, cx, cy, r: cell / 5, class: "mark-link"}));
    else if (word && state.threshold > 0 && w >= state.threshold * 1000) grid.appendChild(svg("circle", {...at, cx, cy, r: cell / 5, class: "mark-threshold"}));
    if (marks.diagonal && marks.diagonal.has(k)) {
      grid.appendChild(svg("line", {...at, x1: cx - cell / 3, y1: cy + cell / 3, x2: cx + cell / 3, y2: cy - cell / 3, class: "mark-diagonal"}));
    }
  }));
  panel.appendChild(grid);
  if (state.row !== null && state.row < rows.length) panel.appendChild(rowBars(rows[state.row], cols, matrix[state.row] || []));
  return panel;
}

function rowBars(target, cols, weights) {
  // the chosen target word's row: one bar per source word (piece)
  const box = document.createElement("div");
  box.className = "row-view";
  const title = document.createElement("div");
  title.textContent = "row of “" + target + "”";
  box.appendChild(title);
  cols.forEach((w, i) => {
    const line = document.createElement("div");
    line.className = "bar";
    line.innerHTML = `<span class="bar-word"></span><span class="bar-fill" style="width:${(weights[i] || 0) / 5}px"></span><span class="bar-value">${((weights[i] || 0) / 1000).toFixed(3)}</span>`;
    line.firstChild.textContent = w;
    box.appendChild(line);
  });
  return box;
}

function hover(grid, i, j, w, source, target) {
  grid.querySelectorAll(".hl").forEach((el) => el.classList.remove("hl"));
  if (i === null) { $("status").textContent = ""; return; }
  grid.querySelectorAll(`.src-word[data-i="${i}"], .tgt-word[data-j="${j}"]`).forEach((el) => el.classList.add("hl"));
  $("status").textContent = `${target} ← ${source}: weight ${(w / 1000).toFixed(3)}`;
}

function drawSentence() {
  const n = state.current, s = DATA.sentences[n];
  $("source").textContent = s.src.join(" ");
  $("target").textContent = s.tgt.join(" ");
  $("heading").textContent = "Sentence #" + n;
  $("panels").replaceChildren(...DATA.exports.map((e) => drawPanel(e, n)));
}

// --- controls -----------------------------------------------------------------------------------

function setUp() {
  document.title = DATA.title;
  $("title").textContent = DATA.title;
  $("exports").textContent = DATA.exports.map((e) => e.name + ": " + e.summary).join("  ·  ");
  const sets = [...new Set(DATA.exports.flatMap((e) => Object.keys(e.links)))];
  state.linkSet = sets[0];
  $("link-set").replaceChildren(...sets.map((name) => { const o = document.createElement("option"); o.value = o.textContent = name; return o; }));
  $("link-set").onchange = () => { state.linkSet = $("link-set").value; drawSentence(); };
  $("show-reference").disabled = !DATA.reference;
  $("reference-label").textContent = DATA.reference ? (DATA.reference.kind === "gold" ? "gold (sure / possible)" : "the aligner's links (not gold)") : "no reference";
  for (const id of ["show-links", "show-reference", "show-diagonal"]) $(id).onchange = drawSentence;
  $("view").onchange = () => { state.view = $("view").value; drawSentence(); };
  $("threshold").oninput = () => {
    state.threshold = Number($("threshold").value);
    $("threshold-value").textContent = state.threshold > 0 ? state.threshold.toFixed(2) : "off";
    drawSentence();
  };
  $("search").oninput = applyOrder;
  $("sort").onchange = applyOrder;
  if (!DATA.reference) $("sort").querySelector('option[value="aer"]').disabled = true;
  if (DATA.exports.length < 2) $("sort").querySelector('option[value="disagreement"]').disabled = true;
  $("list").onscroll = drawList;
  document.addEventListener("keydown", (ev) => {
    if (ev.target.tagName === "INPUT" && ev.target.type === "text") return;
    const step = {ArrowDown: 1, ArrowRight: 1, ArrowUp: -1, ArrowLeft: -1}[ev.key];
    if (!step || !state.order.length) return;
    ev.preventDefault();
    const k = state.order.indexOf(state.current);
    choose(state.order[Math.max(0, Math.min(state.order.length - 1, (k < 0 ? 0 : k + step)))]);
  });
  applyOrder();
  choose(state.order.length ? state.order[0] : 0);
}

setUp();
