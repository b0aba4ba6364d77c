// The log drawings: each replica's log as a bar of records against a shared
// offset scale, the part below the partition's high watermark committed
// (solid) and the part above not yet (pale), with the replica's own HW as a
// tick and the partition HW as a dashed line through every row.

import { s, h } from "./dom.js";

const W = 1000; // viewBox width; the bar stretches to its cell
const H = 26;
const CELL_LIMIT = 48; // up to this many offsets, records are drawn one by one

// scaleFor picks the offset range of a partition's drawing.
export function scaleFor(p) {
  let top = Math.max(p.hw, 0);
  for (const v of p.views) top = Math.max(top, v.leo, v.hw);
  if (top <= CELL_LIMIT) {
    return { max: Math.max(top + 2, 12), cells: true };
  }
  return { max: Math.ceil(top * 1.06), cells: false };
}

const x = (off, sc) => (Math.min(off, sc.max) / sc.max) * W;

// replicaBar draws one replica's log.
export function replicaBar(v, sc, partHW, status) {
  const parts = [s("rect", { class: "track", x: 0, y: 4, width: W, height: H - 8, rx: 2 })];
  const from = Math.max(v.logStart, 0);
  const to = Math.max(v.leo, from);
  if (sc.cells) {
    const cw = W / sc.max;
    const gap = Math.min(cw * 0.12, 4);
    for (let i = from; i < to; i++) {
      parts.push(s("rect", {
        class: i < partHW ? "rec committed" : "rec uncommitted",
        x: i * cw + gap, y: 6, width: cw - 2 * gap, height: H - 12, rx: 1.5,
      }));
    }
  } else {
    const mid = Math.min(Math.max(partHW, from), to);
    if (mid > from) parts.push(s("rect", { class: "rec committed", x: x(from, sc), y: 6, width: x(mid, sc) - x(from, sc), height: H - 12 }));
    if (to > mid) parts.push(s("rect", { class: "rec uncommitted", x: x(mid, sc), y: 6, width: x(to, sc) - x(mid, sc), height: H - 12 }));
  }
  parts.push(s("line", { class: "hw-line", x1: x(partHW, sc), x2: x(partHW, sc), y1: 0, y2: H, "vector-effect": "non-scaling-stroke" }));
  if (v.alive && v.reported !== false) { // no ticks at a 0 nobody reported
    parts.push(s("line", { class: "hw-tick", x1: x(v.hw, sc), x2: x(v.hw, sc), y1: 2, y2: H - 2, "vector-effect": "non-scaling-stroke" }));
    parts.push(s("line", { class: "leo-tick", "data-mark": "leo-own", x1: x(to, sc), x2: x(to, sc), y1: 2, y2: H - 2, "vector-effect": "non-scaling-stroke" }));
  }
  // A follower's LEO as its leader knows it (its last fetch offset): a
  // triangle under the bar, trailing the follower's own LEO tick by one
  // fetch round trip.
  const known = !v.leader && v.leaderLeo !== undefined && v.leaderLeo !== null;
  if (known) {
    const lx = x(v.leaderLeo, sc);
    parts.push(s("path", { class: "leo-leader", "data-mark": "leo-leader", d: `M ${lx - 9} ${H} L ${lx + 9} ${H} L ${lx} ${H - 9} Z` }));
  }
  const title = `broker ${v.broker} (${status}): LEO ${v.leo}` + (known ? ` (the leader knows ${v.leaderLeo})` : "") +
    `, HW ${v.hw}, log start ${v.logStart}` + (v.leader ? "" : `, last caught up ${v.lagMs} ms ago`);
  return s("svg", {
    class: `bar st-${status}`, viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none",
    role: "img", "aria-label": title,
  }, s("title", {}, title), parts);
}

// axis is the scale row above the replicas: offset 0, the partition HW and
// the top of the scale.
export function axis(sc, partHW) {
  const pct = (off) => `${(Math.min(off, sc.max) / sc.max) * 100}%`;
  const hw = h("span", { class: "axis-hw", title: "high watermark: consumers read offsets below it" }, `HW ${partHW}`);
  hw.style.left = pct(partHW);
  return h("div", { class: "axis" },
    h("span", { class: "axis-0" }, "0"),
    hw,
    h("span", { class: "axis-max" }, String(sc.max)));
}
