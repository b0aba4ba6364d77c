// The Groups view: every consumer group with its state, members, their
// assignments, and the lag of each partition (committed offset against the
// high watermark). It asks /console/api/groups every few seconds.

import { h, fill, keyed } from "./dom.js";
import { get } from "./api.js";

const REFRESH_MS = 2000;
const $ = (id) => document.getElementById(id);

const num = (v) => (v < 0 ? "-" : String(v));

function memberRows(g) {
  if (!g.members.length) return h("p", { class: "muted" }, "No active members.");
  return h(
    "table",
    { class: "group-table members" },
    h("thead", {}, h("tr", {}, ["CONSUMER-ID", "INSTANCE", "CLIENT-ID", "HOST", "ASSIGNMENT"].map((c) => h("th", {}, c)))),
    h(
      "tbody",
      {},
      g.members.map((m) =>
        h(
          "tr",
          { "data-member": m.id },
          h("td", { class: "mono" }, m.id),
          h("td", {}, m.instanceId || "-"),
          h("td", {}, m.clientId || "-"),
          h("td", {}, m.host || "-"),
          h("td", { class: "mono" }, m.assigned.length ? m.assigned.join(", ") : "-"),
        ),
      ),
    ),
  );
}

// lagBar is a bar as long as lag against the group's largest; its width
// is set through the CSSOM (the page's CSP forbids style attributes).
function lagBar(lag, most) {
  const bar = h("span", {});
  bar.style.width = `${lag > 0 ? Math.max(2, (100 * lag) / most) : 0}%`;
  return bar;
}

function lagRows(g) {
  if (!g.partitions.length) return h("p", { class: "muted" }, "No committed offsets or assignments yet.");
  const most = Math.max(1, ...g.partitions.map((p) => p.lag));
  return h(
    "table",
    { class: "group-table lag" },
    h("thead", {}, h("tr", {}, ["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "", "CONSUMER-ID"].map((c) => h("th", {}, c)))),
    h(
      "tbody",
      {},
      g.partitions.map((p) =>
        h(
          "tr",
          { "data-group-partition": `${p.topic}-${p.partition}`, "data-lag": p.lag },
          h("td", {}, p.topic),
          h("td", { class: "num" }, p.partition),
          h("td", { class: "num" }, num(p.committed)),
          h("td", { class: "num" }, num(p.hw)),
          h("td", { class: ["num", p.lag > 0 && "lagging"] }, num(p.lag)),
          h("td", { class: "lagbar" }, lagBar(p.lag, most)),
          h("td", { class: "mono" }, p.member || "-"),
        ),
      ),
    ),
  );
}

function updateCard(el, g) {
  fill(
    el,
    h(
      "div",
      { class: "group-head" },
      h("h3", {}, g.id),
      h("span", { class: `badge state-${g.state.toLowerCase()}` }, g.state),
      h("span", { class: "muted" }, `${g.protocol || "no protocol"} · generation ${g.generation} · coordinator ${g.coordinator} · lag ${g.totalLag}`),
    ),
    g.error ? h("p", { class: "bad" }, g.error) : null,
    memberRows(g),
    lagRows(g),
  );
}

async function refresh() {
  const res = await get("/console/api/groups");
  const status = $("groups-status");
  if (!res.ok) {
    status.textContent = res.status === 401 ? "log in to see the groups" : `${res.data.name || `HTTP ${res.status}`}: ${res.data.message || ""}`;
    return;
  }
  const d = res.data;
  status.textContent = `${d.groups.length} group${d.groups.length === 1 ? "" : "s"}${d.more ? ` (${d.more} more not shown)` : ""}${d.error ? ` · ${d.error}` : ""}`;
  const list = $("groups");
  keyed(
    list,
    d.groups,
    (g) => g.id,
    (g) => h("article", { class: "group-card", "data-group": g.id }),
    updateCard,
  );
  $("groups-empty").hidden = d.groups.length > 0;
}

// startGroups refreshes the view now and every REFRESH_MS.
export function startGroups() {
  let busy = false;
  const tick = async () => {
    if (busy) return;
    busy = true;
    try {
      await refresh();
    } finally {
      busy = false;
    }
  };
  tick();
  setInterval(tick, REFRESH_MS);
}
