// The tidemark console: follows /console/events (Server-Sent Events fed by
// AdminService.WatchCluster) and draws brokers, partitions and the
// timeline; with actions enabled, its buttons call the REST API under /v1.

import { h, fill, keyed, fmtTime, fmtLag, setList } from "./dom.js";
import { actions, login, runningHere, signedIn } from "./api.js";
import { scaleFor, replicaBar, axis } from "./bars.js";
import { startGroups } from "./groups.js";

const MAX_EVENTS = 600;
const SHOWN_EVENTS = 250;
const MAX_OUTCOMES = 40;

const state = {
  features: { actions: false, nodeActions: false, staleAfterMs: 3000, heartbeatMs: 15000 },
  featureKey: "",
  status: { connected: false, message: "connecting to the console server" },
  streamOpen: false,
  everOpen: false,
  snap: null,
  snapAt: 0,
  events: [],
  seqs: new Set(),
  eventsDirty: true,
  // The dev launcher's scenarios (null until loaded) and the run started
  // from a console (null: none yet).
  scenarios: null,
  scenariosError: "",
  run: null,
  scenariosDirty: true,
};

const $ = (id) => document.getElementById(id);

// ---------------------------------------------------------------- stream

// The event stream, and when it last said anything. The server sends at
// least a ping every heartbeat; a stream silent for SILENT_BEATS of them is
// dead though its connection never closed (a proxy or NAT that forgot it,
// a laptop that slept), and EventSource would wait on it for ever: it is
// replaced. Every reconnection the page makes waits a little longer than
// the last (1 s doubling up to 30 s, jittered, so pages do not come back
// together), from 1 s again once a stream says hello.
const SILENT_BEATS = 3;
const RETRY_FIRST_MS = 1000;
const RETRY_MAX_MS = 30000;
const stream = { es: null, heardAt: 0, retries: 0, timer: 0, retryAt: 0 };

function connect() {
  if (stream.es) stream.es.close(); // one stream per page (a login reconnects)
  clearTimeout(stream.timer);
  stream.timer = 0;
  const es = new EventSource("/console/events");
  stream.es = es;
  stream.heardAt = Date.now();
  // Every handler below first checks that its stream is still the page's.
  const mine = (fn) => (e) => {
    if (stream.es !== es) return;
    stream.heardAt = Date.now();
    fn(e);
  };
  es.addEventListener("open", mine(() => {
    state.streamOpen = true;
    state.everOpen = true;
    schedule();
  }));
  es.addEventListener("error", async () => {
    if (stream.es !== es) return;
    state.streamOpen = false;
    schedule();
    // The page reconnects itself, with backoff, rather than let
    // EventSource retry every second for ever.
    es.close();
    stream.es = null;
    // EventSource cannot tell a 401 (the session expired) from any other
    // refusal (429: too many streams open): ask.
    if (!(await signedIn())) {
      showLogin("The session ended. Log in again.");
      return;
    }
    reconnectLater();
  });
  es.addEventListener("ping", mine(() => {}));
  es.addEventListener("hello", mine((e) => {
    const f = JSON.parse(e.data);
    const key = JSON.stringify(f);
    if (key !== state.featureKey) {
      // Buttons are built with the cards: rebuild them all.
      state.featureKey = key;
      state.features = f;
      $("brokers").replaceChildren();
      $("topics").replaceChildren();
    }
    stream.retries = 0;
    document.body.dataset.actions = f.actions ? "on" : "off";
    if (f.scenarios && !state.scenarios) loadScenarios();
    state.scenariosDirty = true;
    // A new stream replays the retained timeline, and the scenario run
    // the server follows, if any: a run the page knew from before (from a
    // gateway since restarted, which ended it) is not one.
    state.run = null;
    state.events = [];
    state.seqs.clear();
    state.eventsDirty = true;
    schedule();
  }));
  es.addEventListener("status", mine((e) => {
    state.status = JSON.parse(e.data);
    schedule();
  }));
  es.addEventListener("snapshot", mine((e) => {
    state.snap = JSON.parse(e.data);
    state.snapAt = Date.now();
    schedule();
  }));
  // After the whole snapshot, only what changed (patch.go on the server).
  es.addEventListener("patch", mine((e) => {
    state.snap = applyPatch(state.snap, JSON.parse(e.data));
    state.snapAt = Date.now();
    schedule();
  }));
  es.addEventListener("scenario", mine((e) => {
    state.run = JSON.parse(e.data);
    state.scenariosDirty = true;
    schedule();
  }));
  es.addEventListener("events", mine((e) => {
    for (const ev of JSON.parse(e.data)) {
      if (state.seqs.has(ev.seq)) continue;
      state.seqs.add(ev.seq);
      state.events.push(ev);
    }
    if (state.events.length > MAX_EVENTS) {
      for (const ev of state.events.splice(0, state.events.length - MAX_EVENTS)) state.seqs.delete(ev.seq);
    }
    state.eventsDirty = true;
    schedule();
  }));
}

// reconnectLater opens a new stream after the next backoff.
function reconnectLater() {
  if (stream.timer) return;
  const base = Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** stream.retries);
  const wait = base / 2 + Math.random() * (base / 2);
  stream.retries++;
  stream.retryAt = Date.now() + wait;
  stream.timer = setTimeout(connect, wait);
}

// checkStream replaces a stream that went silent (see SILENT_BEATS), also
// one whose connection never opened.
function checkStream() {
  const es = stream.es;
  if (!es || Date.now() - stream.heardAt <= SILENT_BEATS * (state.features.heartbeatMs || 15000)) return;
  es.close();
  stream.es = null;
  state.streamOpen = false;
  schedule();
  reconnectLater();
}

let pending = false;
function schedule() {
  if (pending) return;
  pending = true;
  setTimeout(() => {
    pending = false;
    render();
  }, 16);
}

// ---------------------------------------------------------------- render

function render() {
  renderConnection();
  const snap = state.snap;
  if (!snap) {
    $("empty").hidden = false;
    fill($("empty"), emptyMessage());
  } else {
    $("empty").hidden = true;
    renderSummary(snap);
    renderBrokers(snap);
    renderTopics(snap);
  }
  if (state.eventsDirty) {
    state.eventsDirty = false;
    renderTimeline();
  }
  if (state.scenariosDirty) {
    state.scenariosDirty = false;
    renderScenarios();
  }
}

// connection is one of live, stale (no snapshot for a while), unreachable
// (the console hears nothing from the cluster) and offline (the page hears
// nothing from the console server).
function connection() {
  if (!state.streamOpen) return "offline";
  if (!state.status.connected) return state.snap || state.status.message !== "connecting to the cluster" ? "unreachable" : "connecting";
  if (Date.now() - state.snapAt > state.features.staleAfterMs * 1.5) return "stale";
  return "live";
}

function renderConnection() {
  const c = connection();
  const pill = $("conn");
  pill.dataset.state = c;
  const age = state.snap ? `updated ${fmtTime(state.snap.time, false)}` : "";
  const label = {
    live: "live",
    stale: "stale",
    unreachable: "cluster unreachable",
    connecting: "connecting…",
    offline: "console offline",
  }[c];
  fill(pill, h("span", { class: "dot" }), label, age && h("span", { class: "age" }, age));

  const banner = $("banner");
  let msg = null;
  if (c === "offline") {
    msg = state.everOpen
      ? "Lost the connection to the console server (the gateway). " + retryIn()
      : "Cannot reach the console server (the gateway). " + retryIn();
  } else if (c === "unreachable") {
    msg = `${capital(state.status.message)}.`;
  } else if (c === "stale") {
    msg = "No snapshot from the cluster for a few seconds; waiting for the next one.";
  }
  if (msg && state.snap) msg += ` The picture below is from ${fmtTime(state.snap.time, false)} and may be out of date.`;
  banner.hidden = !msg;
  banner.dataset.state = c;
  if (msg) fill(banner, h("strong", {}, c === "offline" ? "Console offline. " : c === "stale" ? "Stale. " : "Cluster unreachable. "), msg);
  document.body.classList.toggle("stale", c !== "live" && c !== "connecting");
}

function retryIn() {
  const s = Math.ceil((stream.retryAt - Date.now()) / 1000);
  return stream.timer && s > 0 ? `Retrying in ${s} s…` : "Retrying…";
}

function emptyMessage() {
  const c = connection();
  if (c === "offline") return [h("h2", {}, "The console server does not answer"), h("p", {}, "Is the gateway running? The page reconnects by itself.")];
  if (c === "unreachable") return [h("h2", {}, "The cluster is unreachable"), h("p", {}, capital(state.status.message) + ".")];
  return [h("h2", {}, "Waiting for the first snapshot of the cluster…")];
}

function capital(s) {
  return s ? s[0].toUpperCase() + s.slice(1) : "";
}

function renderSummary(snap) {
  const ctl = snap.controller;
  const standby = snap.controllers.filter((c) => !c.active).map((c) => `C${c.id}`);
  fill($("summary"),
    h("span", { class: "sum-item", title: "cluster id" }, h("span", { class: "k" }, "cluster"), snap.clusterId || "—"),
    h("span", { class: "sum-item", "data-controller": ctl.id, title: ctl.address || "" },
      h("span", { class: "k" }, "active controller"),
      ctl.id >= 0 ? `C${ctl.id}` : h("span", { class: "bad" }, "none")),
    h("span", { class: "sum-item", title: "controller_epoch: bumped by every controller election; brokers refuse older ones" },
      h("span", { class: "k" }, "controller_epoch"), ctl.id >= 0 ? String(ctl.epoch) : "—"),
    standby.length ? h("span", { class: "sum-item" }, h("span", { class: "k" }, "standby"), standby.join(", ")) : null,
  );
}

// ---------------------------------------------------------------- brokers

const BROKER_ACTIONS = [
  ["stop", "Stop", "SIGTERM: a graceful, controlled shutdown"],
  ["kill", "Kill", "SIGKILL: a crash"],
  ["start", "Start", "start the broker's process"],
  ["restart", "Restart", "stop, then start"],
  ["pause", "Pause", "SIGSTOP: frozen, like a long GC pause"],
  ["resume", "Resume", "SIGCONT"],
];

function renderBrokers(snap) {
  keyed($("brokers"), snap.brokers, (b) => b.id, makeBroker, updateBroker);
}

function makeBroker(b) {
  const el = h("article", { class: "broker", "data-broker": b.id });
  el.info = h("div", { class: "broker-info" });
  el.append(el.info);
  el.btns = {};
  if (state.features.nodeActions) {
    const row = h("div", { class: "broker-actions" });
    for (const [act, label, title] of BROKER_ACTIONS) {
      const btn = h("button", { type: "button", class: `btn btn-${act}`, "data-action": act, title }, label);
      btn.addEventListener("click", () => nodeAction(el, b.id, act));
      el.btns[act] = btn;
      row.append(btn);
    }
    el.append(row);
  }
  return el;
}

function updateBroker(el, b) {
  el.dataset.state = b.state;
  el.dataset.process = b.process || "";
  el.className = `broker state-${b.state}`;
  const leads = b.leads.length ? b.leads.join(", ") : "no partition";
  const faults = b.faults.map((f) => `${f.topic || "*"}-${f.partition < 0 ? "*" : f.partition}: ${f.stall ? "stalled" : `+${f.delayMs} ms`}`);
  if (b.cutLinks.length) faults.push(`cannot reach ${b.cutLinks.map((id) => `B${id}`).join(", ")}`);
  if (b.isolated) faults.push(b.isolatedFromPeers ? "isolated from etcd, the controllers and the other brokers" : "isolated from etcd and the controllers");
  fill(el.info,
    h("div", { class: "broker-title" },
      h("span", { class: "broker-name" }, `B${b.id}`),
      h("span", { class: `pill state-${b.state}`, title: b.stateReason || "" }, b.state.replace("-", " ")),
      b.process && b.process !== "running" ? h("span", { class: "pill process" }, b.process) : null),
    h("dl", { class: "facts" },
      h("dt", {}, "rack"), h("dd", {}, b.rack || "—"),
      h("dt", {}, "broker epoch"), h("dd", { title: "the create revision of its registration" }, b.alive ? String(b.epoch) : "—"),
      h("dt", {}, "address"), h("dd", { class: "mono" }, b.address || "—"),
      h("dt", {}, "leads"), h("dd", { class: "leads", title: `${b.leaderCount} partition(s)` }, leads),
      h("dt", {}, "replicas"), h("dd", {}, String(b.replicaCount)),
      faults.length ? [h("dt", {}, "faults"), h("dd", { class: "bad", "data-faults": "" }, faults.join("; "))] : null),
    b.stateReason ? h("div", { class: "reason" }, b.stateReason) : null,
  );
  if (!state.features.nodeActions) return;
  const p = b.process || (b.alive ? "running" : "stopped");
  const can = {
    stop: p === "running",
    kill: p === "running" || p === "paused",
    start: p === "stopped" || p === "exited",
    restart: p !== "paused" && p !== "stopping", // a stopping process takes no action until it has ended
    pause: p === "running",
    resume: p === "paused",
  };
  for (const [act, btn] of Object.entries(el.btns)) {
    btn.disabled = !!el.busy || !can[act];
    btn.hidden = (act === "resume" && p !== "paused") || (act === "pause" && p !== "running") ||
      (act === "start" && (p === "running" || p === "paused"));
  }
}

async function nodeAction(el, id, act) {
  el.busy = true;
  Object.values(el.btns).forEach((b) => (b.disabled = true));
  const res = await actions.node(id, act);
  el.busy = false;
  outcome(`${act} broker ${id}`, res, ({ node: n }) =>
    `process ${n.name} is ${n.state.replace("NODE_STATE_", "").toLowerCase()}${n.pid ? ` (pid ${n.pid})` : ""}`);
  schedule();
}

// ---------------------------------------------------------------- topics

function renderTopics(snap) {
  const parts = new Map();
  for (const p of snap.partitions) {
    if (!parts.has(p.topic)) parts.set(p.topic, []);
    parts.get(p.topic).push(p);
  }
  if (!snap.topics.length) {
    fill($("topics"), h("p", { class: "muted" }, "No topics yet. Create one with `tidemark topics create`."));
    return;
  }
  if ($("topics").firstElementChild && !$("topics").firstElementChild.dataset.key) $("topics").replaceChildren();
  // A scenario's topic comes first, beside its timeline.
  const focus = state.run && state.run.topic;
  const topics = focus ? [...snap.topics.filter((t) => t.name === focus), ...snap.topics.filter((t) => t.name !== focus)] : snap.topics;
  keyed($("topics"), topics, (t) => t.name, makeTopic, (el, t) => {
    el.classList.toggle("scenario-focus", t.name === focus);
    updateTopic(el, t, parts.get(t.name) || []);
  });
}

function makeTopic(t) {
  const el = h("section", { class: "topic", "data-topic": t.name });
  el.head = h("div", { class: "topic-head" });
  el.append(el.head);
  if (state.features.actions) {
    el.minIsr = h("input", { type: "number", min: 1, step: 1, name: "minIsr", class: "num" });
    el.unclean = h("select", { name: "unclean" }, h("option", { value: "false" }, "false"), h("option", { value: "true" }, "true"));
    const apply = h("button", { type: "button", class: "btn", "data-action": "configs" }, "Apply");
    const form = h("form", { class: "topic-config", title: "topic configs, changed at run time" },
      h("label", {}, "min.insync.replicas ", el.minIsr),
      h("label", {}, "unclean.leader.election.enable ", el.unclean),
      apply);
    const dirty = () => (form.dataset.dirty = "1");
    el.minIsr.addEventListener("input", dirty);
    el.unclean.addEventListener("change", dirty);
    form.addEventListener("submit", (e) => e.preventDefault());
    apply.addEventListener("click", async () => {
      apply.disabled = true;
      const configs = { "min.insync.replicas": el.minIsr.value, "unclean.leader.election.enable": el.unclean.value };
      const res = await actions.configs(t.name, configs);
      apply.disabled = false;
      if (res.ok) delete form.dataset.dirty;
      outcome(`configs of ${t.name}`, res, () => Object.entries(configs).map(([k, v]) => `${k}=${v}`).join(", "));
    });
    el.form = form;
    el.append(form);
  }
  el.grid = h("div", { class: "partition-grid" });
  el.append(el.grid);
  return el;
}

function updateTopic(el, t, parts) {
  const unclean = t.unclean === null || t.unclean === undefined ? "?" : String(t.unclean);
  fill(el.head,
    h("h3", {}, t.name),
    h("span", { class: "meta" },
      `${t.partitions} partition${t.partitions === 1 ? "" : "s"} · RF ${t.replicationFactor} · min.insync.replicas ${t.minIsr} · unclean.leader.election.enable ${unclean}`),
  );
  if (el.form && !el.form.dataset.dirty && !el.form.contains(document.activeElement)) {
    el.minIsr.value = String(t.minIsr);
    if (t.unclean !== null && t.unclean !== undefined) el.unclean.value = String(t.unclean);
  }
  keyed(el.grid, parts, (p) => p.partition, (p) => makePartition(p), updatePartition);
}

// ---------------------------------------------------------------- partitions

function makePartition(p) {
  const name = `${p.topic}-${p.partition}`;
  const el = h("article", { class: "partition", "data-partition": name, "data-topic": p.topic, "data-index": p.partition });
  el.head = h("header", { class: "p-head" });
  el.axisCell = h("div", { class: "axis-cell" });
  el.rows = h("div", { class: "rows" });
  el.append(el.head,
    h("div", { class: "row axis-row" }, h("div", { class: "r-label muted" }, "replica"), el.axisCell, h("div", { class: "r-nums muted" }, "LEO · HW"), h("div", { class: "r-act" })),
    el.rows);
  if (state.features.actions) {
    const count = h("input", { type: "number", name: "count", min: 1, max: 10000, value: "10", class: "num", title: "records" });
    const acks = h("select", { name: "acks", title: "acks" },
      h("option", { value: "all" }, "acks=all"), h("option", { value: "1" }, "acks=1"), h("option", { value: "0" }, "acks=0"));
    const produce = h("button", { type: "button", class: "btn primary", "data-action": "produce" }, "Produce");
    produce.addEventListener("click", async () => {
      produce.disabled = true;
      const n = Math.max(1, parseInt(count.value, 10) || 1);
      const res = await actions.produce(p.topic, p.partition, n, acks.value);
      produce.disabled = false;
      outcome(`produce ${n} to ${name} (acks=${acks.value})`, res, describeProduce(n, acks.value));
    });
    const elect = (type) => {
      const b = h("button", { type: "button", class: "btn", "data-action": `elect-${type}`,
        title: type === "preferred" ? "hand leadership to the first assigned replica" : "elect an out-of-sync replica when no in-sync one is alive (may lose acknowledged records)" },
        type === "preferred" ? "Preferred election" : "Unclean election");
      b.addEventListener("click", async () => {
        b.disabled = true;
        const res = await actions.elect(type, p.topic, p.partition);
        b.disabled = false;
        outcome(`${type} election for ${name}`, res, ({ results: [r] }) => `leader B${r.leader}, leader epoch ${r.leaderEpoch}`);
      });
      return b;
    };
    el.append(h("footer", { class: "p-actions" },
      h("span", { class: "group" }, count, acks, produce),
      h("span", { class: "group" }, elect("preferred"), elect("unclean"))));
  }
  return el;
}

// describeProduce reads a ProduceResponse (int64s come as strings).
function describeProduce(n, acks) {
  return (d) => {
    let s = `${n} records written with acks=${acks}`;
    if (Number(d.baseOffset) >= 0) s += `, offsets ${d.baseOffset}–${d.lastOffset}`;
    if (d.leaderEpoch >= 0 && acks !== "0") s += ` (leader epoch ${d.leaderEpoch})`;
    if (d.duplicate) s += " (a duplicate of a batch already written)";
    return s;
  };
}

function updatePartition(el, p) {
  el.dataset.leader = String(p.leader);
  el.dataset.leaderEpoch = String(p.leaderEpoch);
  el.dataset.isr = setList(p.isr);
  el.dataset.replicas = setList(p.replicas);
  el.className = ["partition", p.offline && "offline", p.underMinIsr && "under-min-isr", p.underReplicated && "under-replicated"].filter(Boolean).join(" ");
  const badges = [];
  if (p.offline) badges.push(h("span", { class: "badge b-offline", "data-badge": "offline", title: "no live leader: the partition can be neither written nor read" }, "offline"));
  if (p.underMinIsr) badges.push(h("span", { class: "badge b-under-min", "data-badge": "under-min-isr", title: "ISR smaller than min.insync.replicas: acks=all produces are refused (NOT_ENOUGH_REPLICAS)" }, "under min ISR"));
  else if (p.atMinIsr) badges.push(h("span", { class: "badge b-at-min", "data-badge": "at-min-isr", title: "ISR size equals min.insync.replicas: one more loss and acks=all produces are refused" }, "at min ISR"));
  if (p.underReplicated) badges.push(h("span", { class: "badge b-under-rep", "data-badge": "under-replicated", title: "ISR smaller than the assigned replicas" }, "under-replicated"));
  if (p.adding || p.removing) {
    badges.push(h("span", { class: "badge b-moving", "data-badge": "reassigning",
      title: "reassignment in progress: adding " + setList(p.adding || []) + ", removing " + setList(p.removing || []) }, "moving"));
  }
  if (!badges.length) badges.push(h("span", { class: "badge b-ok", "data-badge": "healthy" }, "fully replicated"));
  if (p.leader >= 0 && p.replicas.length && p.replicas[0] !== p.leader) {
    badges.push(h("span", { class: "badge b-not-preferred", "data-badge": "not-preferred",
      title: `the leader is not the preferred replica B${p.replicas[0]}; a preferred election moves leadership back` }, "not on preferred leader"));
  }
  const lead = p.leader >= 0 ? h("span", { class: "leader" }, `leader B${p.leader}`) : h("span", { class: "leader bad" }, "no leader");
  fill(el.head,
    h("div", { class: "p-title" },
      h("h4", {}, `${p.topic}-${p.partition}`), lead,
      h("span", { class: "kv", title: "leader epoch: bumped by every leader election" }, `leader epoch ${p.leaderEpoch}`),
      h("span", { class: "badges" }, badges)),
    h("div", { class: "p-sets" },
      h("span", { class: "kv", title: "assigned replicas, preferred leader first" }, `AR [${p.replicas.join(",")}]`),
      h("span", { class: "kv isr", title: "in-sync replicas" }, `ISR [${p.isr.join(",")}]`),
      h("span", { class: "kv osr", title: "assigned replicas out of the ISR" }, `OSR [${p.replicas.filter((r) => !p.isr.includes(r)).join(",")}]`),
      h("span", { class: "kv", title: "min.insync.replicas" }, `min ISR ${p.minIsr}`),
      h("span", { class: "kv", title: "high watermark: consumers read up to here" }, `HW ${p.hwKnown ? p.hw : "—"}`),
      h("span", { class: "kv muted", title: "partition epoch: bumped by every leader or ISR change" }, `partition epoch ${p.partitionEpoch}`)),
  );
  const sc = scaleFor(p);
  fill(el.axisCell, axis(sc, p.hw));
  const leaderView = p.views.find((v) => v.leader);
  keyed(el.rows, p.views, (v) => v.broker, (v) => makeRow(v, p), (row, v) => updateRow(row, v, p, sc, leaderView));
}

function replicaStatus(v) {
  if (!v.alive) return "down";
  if (v.leader) return "leader";
  return v.inIsr ? "isr" : "out-of-sync";
}

const STATUS_TEXT = { leader: "leader", isr: "in sync", "out-of-sync": "out of sync", down: "down" };

function makeRow(v, p) {
  const row = h("div", { class: "row replica", "data-replica": v.broker });
  row.label = h("div", { class: "r-label" });
  row.bar = h("div", { class: "r-bar" });
  row.nums = h("div", { class: "r-nums" });
  row.act = h("div", { class: "r-act" });
  row.append(row.label, row.bar, row.nums, row.act);
  row.btns = {};
  if (state.features.actions) {
    const delay = h("select", { name: "delay", title: "delay added to each fetch round trip" },
      h("option", { value: "500" }, "0.5 s"), h("option", { value: "2000" }, "2 s"),
      h("option", { value: "5000" }, "5 s"), h("option", { value: "15000" }, "15 s"));
    const mk = (act, label, title, run) => {
      const b = h("button", { type: "button", class: `btn small btn-${act}`, "data-action": act, title }, label);
      b.addEventListener("click", async () => {
        b.disabled = true;
        await run();
        b.disabled = false;
        schedule();
      });
      row.btns[act] = b;
      return b;
    };
    const name = `${p.topic}-${p.partition}`;
    row.act.append(
      mk("stall", "Stall", `stop broker ${v.broker}'s fetching of ${name}`, async () => {
        const res = await actions.fault(v.broker, p.topic, p.partition, { stall: true });
        outcome(`stall B${v.broker} fetching ${name}`, res, () => "stalled; produce to the partition and it falls out of the ISR after replica.lag.time.max.ms");
      }),
      mk("slow", "Slow", `add the chosen delay to broker ${v.broker}'s fetches of ${name}`, async () => {
        const ms = parseInt(delay.value, 10);
        const res = await actions.fault(v.broker, p.topic, p.partition, { delayMs: ms });
        outcome(`slow B${v.broker} fetching ${name} by ${ms} ms`, res, () => `each fetch round trip delayed by ${ms} ms`);
      }),
      delay,
      mk("clear", "Clear", `clear every fault injected on broker ${v.broker}`, async () => {
        const res = await actions.clearFaults(v.broker);
        outcome(`clear faults on B${v.broker}`, res, () => "fetching normally; it rejoins the ISR once caught up");
      }),
    );
    row.delay = delay;
  }
  return row;
}

function updateRow(row, v, p, sc, leaderView) {
  const st = replicaStatus(v);
  row.dataset.status = st;
  row.dataset.leo = String(v.leo);
  row.dataset.hw = String(v.hw);
  row.className = `row replica st-${st}`;
  fill(row.label,
    h("span", { class: "swatch" }),
    h("span", { class: "r-id" }, `B${v.broker}`),
    h("span", { class: "r-role" }, STATUS_TEXT[st]),
    v.preferred ? h("span", { class: "pref", title: "preferred leader (first assigned replica)" }, "★") : null,
    !v.alive && v.inIsr ? h("span", { class: "r-note", title: "still listed in the ISR" }, "in ISR") : null);
  fill(row.bar, replicaBar(v, sc, p.hw, st));
  const unknown = !v.reported; // a dead broker, or a controller that has not heard from it yet
  const lines = [h("div", {}, h("span", { class: "k" }, "LEO "), unknown ? "—" : String(v.leo),
    h("span", { class: "k" }, " · HW "), unknown ? "—" : String(v.hw))];
  if (!v.alive) {
    lines.push(h("div", { class: "sub" }, "not reporting"));
  } else if (unknown) {
    lines.push(h("div", { class: "sub" }, "no report yet"));
  } else if (!v.leader) {
    const behind = leaderView ? leaderView.leo - v.leo : 0;
    if (v.leaderLeo !== undefined && v.leaderLeo !== null) {
      lines.push(h("div", { class: "sub leader-knows", title: "this follower's LEO as its leader knows it: the offset of its last fetch; the HW can only follow this" },
        "leader knows ", h("strong", {}, String(v.leaderLeo)),
        v.leo > v.leaderLeo ? ` (${v.leo - v.leaderLeo} not yet told)` : ""));
    }
    lines.push(h("div", { class: "sub" },
      behind > 0 ? `${behind} behind · ` : "",
      `caught up ${fmtLag(v.lagMs)} ago`));
  } else if (v.leader) {
    lines.push(h("div", { class: "sub" }, `log start ${v.logStart}`));
  }
  if (v.fault) {
    lines.push(h("div", { class: "fault", "data-fault": v.fault.stall ? "stall" : "delay" }, v.fault.stall ? "fetching stalled" : `fetch +${v.fault.delayMs} ms`));
  }
  fill(row.nums, lines);
  const follower = !v.leader;
  row.act.hidden = !follower;
  for (const b of Object.values(row.btns)) b.disabled = !v.alive || !follower;
  if (row.btns.clear) row.btns.clear.disabled = !v.alive;
}

// ---------------------------------------------------------------- scenarios

async function loadScenarios() {
  const res = await actions.scenarios();
  if (res.ok) {
    state.scenarios = res.data.scenarios || [];
    state.scenariosError = "";
    if (res.data.run && !state.run) state.run = res.data.run;
  } else {
    state.scenarios = [];
    state.scenariosError = `${res.data.name || `HTTP ${res.status}`}: ${res.data.message || ""}`;
  }
  state.scenariosDirty = true;
  schedule();
}

const STEP_KIND = { started: "start", step: "step", check: "check", finished: "verdict" };

function renderScenarios() {
  const section = $("scenarios-section");
  section.hidden = !state.features.scenarios;
  if (section.hidden) return;
  const run = state.run;
  const running = !!(run && run.running);
  // Only the page that started the run holds its stream, which cancels it.
  $("cancel-scenario").hidden = !running || !runningHere();
  $("cancel-scenario").disabled = !!(run && run.cancelled);

  const head = $("scenario-run");
  head.hidden = !run;
  if (run) {
    const last = run.steps[run.steps.length - 1];
    let verdict = h("span", { class: "running" }, run.cancelled ? "cancelling… (healing the cluster)" : "running…");
    if (!running && last && last.kind === "finished") {
      verdict = last.passed ? h("span", { class: "pass" }, "✓ as the note says")
        : h("span", { class: "fail" }, last.error ? "✗ not carried out" : "✗ NOT as the note says");
    }
    fill(head,
      h("div", { class: "sr-top" }, h("code", {}, run.scenario), " ", verdict),
      run.topic ? h("div", { class: "muted" }, "topic ", h("code", {}, run.topic), " (first in Partitions)") : null,
      run.rule ? h("p", { class: "sr-rule" }, run.rule) : null);
    head.dataset.scenario = run.scenario;
  }
  head.dataset.running = String(running);

  const steps = run ? run.steps.filter((st) => st.kind !== "started") : [];
  fill($("scenario-steps"), steps.map((st) => {
    const passed = st.kind === "check" || st.kind === "finished" ? String(st.passed) : "";
    const mark = passed === "" ? "" : st.passed ? "✓ " : "✗ ";
    const body = st.kind === "check" ? [h("span", { class: "st-check" }, mark, st.check), st.text ? h("div", { class: "st-detail muted" }, st.text) : null]
      : st.kind === "finished" ? [h("strong", {}, mark, st.text), ...(st.failures || []).map((f) => h("div", { class: "st-detail" }, "– ", f))]
        : [st.text];
    return h("li", { class: `st st-${STEP_KIND[st.kind] || "step"}`, "data-index": st.index, "data-kind": st.kind, "data-passed": passed },
      h("time", { title: fmtTime(st.time, false) }, `+${(st.elapsedMs / 1000).toFixed(1)}s`),
      h("div", { class: "st-body" }, body));
  }));
  const ol = $("scenario-steps");
  ol.scrollTop = ol.scrollHeight;

  if (state.scenariosError) {
    fill($("scenarios"), h("li", { class: "fail" }, state.scenariosError));
    return;
  }
  if (!state.scenarios) {
    fill($("scenarios"), h("li", { class: "muted" }, "loading…"));
    return;
  }
  fill($("scenarios"), state.scenarios.map((sc) => {
    const btn = h("button", { type: "button", class: "btn small", "data-action": "run-scenario", title: `run ${sc.name} on this cluster`,
      disabled: running }, "Run");
    btn.addEventListener("click", async () => {
      btn.disabled = true;
      const res = await actions.runScenario(sc.name);
      outcome(`run scenario ${sc.name}`, res, (d) => `started on topic ${d.topic}`);
      if (!res.ok) btn.disabled = false;
    });
    return h("li", { class: "scn", "data-scenario": sc.name, title: sc.rule },
      h("div", { class: "scn-top" }, h("code", {}, sc.name), " ", h("span", { class: "scn-note muted" }, sc.note), btn),
      h("div", { class: "scn-title" }, sc.title));
  }));
}

// ---------------------------------------------------------------- timeline

const KIND = {
  "isr-shrink": ["ISR shrink", "bad"],
  "isr-expand": ["ISR expand", "good"],
  election: ["Leader election", "info"],
  "unclean-election": ["Unclean election", "bad"],
  "preferred-election": ["Preferred election", "info"],
  truncation: ["Truncation", "warn"],
  "controller-change": ["Controller change", "info"],
  "broker-up": ["Broker up", "good"],
  "broker-down": ["Broker down", "bad"],
  "hw-advance": ["HW advance", "quiet"],
  fenced: ["Fenced", "warn"],
  "topic-created": ["Topic created", "quiet"],
  "topic-deleted": ["Topic deleted", "quiet"],
  "config-changed": ["Config changed", "quiet"],
};

function renderTimeline() {
  const showHW = $("show-hw").checked;
  const list = [];
  // Brokers report in batches: order by time, then by arrival.
  const sorted = state.events.slice().sort((a, b) => a.time - b.time || a.seq - b.seq);
  for (let i = sorted.length - 1; i >= 0 && list.length < SHOWN_EVENTS; i--) {
    const ev = sorted[i];
    if (!showHW && ev.kind === "hw-advance") continue;
    list.push(timelineItem(ev));
  }
  if (!list.length) list.push(h("li", { class: "muted" }, "No events yet."));
  fill($("timeline"), list);
}

function timelineItem(ev) {
  const [label, tone] = KIND[ev.kind] || [ev.kind, "quiet"];
  let subject = "";
  if (ev.kind.startsWith("topic-")) subject = ev.topic || "";
  else if (ev.kind === "config-changed") subject = ev.topic || (ev.node > 0 ? `broker B${ev.node}` : "cluster");
  else if (ev.topic) subject = `${ev.topic}-${ev.partition}`;
  else if (ev.kind === "controller-change") subject = `controller C${ev.node}`;
  else if (ev.kind.startsWith("broker") || ev.kind === "fenced") subject = `broker B${ev.node}`;
  const details = [];
  if (ev.kind.endsWith("election") && ev.node >= 0) details.push(`leader B${ev.node}`);
  if (ev.leaderEpoch) details.push(`epoch ${ev.leaderEpoch}`);
  if (ev.isr && ev.isr.length) details.push(`ISR [${ev.isr.join(",")}]`);
  return h("li", { class: `ev tone-${tone}`, "data-kind": ev.kind },
    h("div", { class: "ev-top" },
      h("time", { datetime: new Date(ev.time).toISOString() }, fmtTime(ev.time)),
      h("span", { class: "ev-kind" }, label),
      subject ? h("span", { class: "ev-subject" }, subject) : null,
      ev.traceUrl ? h("a", { class: "trace", href: ev.traceUrl, target: "_blank", rel: "noopener", title: `trace ${ev.traceId}` }, "trace ↗") : null),
    ev.reason ? h("div", { class: "ev-reason" }, ev.reason) : null,
    details.length ? h("div", { class: "ev-details" }, details.join(" · ")) : null);
}

// ---------------------------------------------------------------- patches

// applyPatch applies one patch to snap (null: none yet; the first patch
// of a new watch then carries everything). Absent sections are unchanged;
// partitions are replaced by key, removed ones dropped, the order kept as
// the server's (topic, then partition).
function applyPatch(snap, p) {
  const s = snap || { controllers: [], brokers: [], topics: [], partitions: [] };
  s.time = p.time;
  for (const k of ["clusterId", "controller", "controllers", "brokers", "topics"]) {
    if (p[k] !== undefined) s[k] = p[k];
  }
  if (p.partitions || p.removed) {
    const key = (x) => `${x.topic}/${x.partition}`;
    const byKey = new Map(s.partitions.map((x) => [key(x), x]));
    for (const k of p.removed || []) byKey.delete(k);
    for (const x of p.partitions || []) byKey.set(key(x), x);
    s.partitions = [...byKey.values()].sort((a, b) => (a.topic < b.topic ? -1 : a.topic > b.topic ? 1 : a.partition - b.partition));
  }
  return s;
}

// ---------------------------------------------------------------- outcomes

function outcome(what, res, describe) {
  afterAction(res);
  const list = $("outcomes");
  $("outcomes-section").hidden = false;
  const ok = res.ok;
  const d = res.data || {};
  const item = h("li", { class: ok ? "ok" : "fail", "data-ok": String(ok), "data-name": ok ? "" : d.name || "" },
    h("div", { class: "o-top" },
      h("time", {}, fmtTime(Date.now(), false)),
      h("span", { class: "o-what" }, what)),
    ok ? h("div", { class: "o-res" }, "✓ ", describe(d))
      : h("div", { class: "o-res" }, "✗ ", h("strong", { class: "o-name" }, d.name || `HTTP ${res.status}`), d.message ? `: ${d.message}` : ""));
  list.prepend(item);
  while (list.children.length > MAX_OUTCOMES) list.lastElementChild.remove();
}

// ---------------------------------------------------------------- login

// showLogin asks for a REST token when the gateway requires authentication
// (a client certificate, when the browser has one, needs no login).
function showLogin(message) {
  const form = $("login");
  $("login-message").textContent = message || "";
  form.hidden = false;
  $("login-token").focus();
}

$("login").addEventListener("submit", async (e) => {
  e.preventDefault();
  const input = $("login-token");
  const res = await login(input.value);
  if (!res.ok) {
    $("login-message").textContent = `${res.data.name || `HTTP ${res.status}`}: ${res.data.message || "login refused"}`;
    return;
  }
  input.value = "";
  $("login").hidden = true;
  connect();
});

// afterAction shows the login form when an action was refused for want of
// authentication.
function afterAction(res) {
  if (res.status === 401) showLogin("Log in to act on the cluster.");
}

// ---------------------------------------------------------------- start

$("show-hw").addEventListener("change", () => {
  state.eventsDirty = true;
  schedule();
});
$("cancel-scenario").addEventListener("click", async () => {
  $("cancel-scenario").disabled = true;
  const res = await actions.cancelScenario();
  outcome("cancel the scenario", res, (d) => `${d.cancelled} cancelled; the launcher heals the cluster`);
  if (!res.ok) $("cancel-scenario").disabled = false;
});
$("clear-outcomes").addEventListener("click", () => {
  $("outcomes").replaceChildren();
  $("outcomes-section").hidden = true;
});
setInterval(() => {
  checkStream();
  renderConnection();
}, 1000);
render();
signedIn().then((ok) => (ok ? connect() : showLogin("This gateway requires authentication.")));
startGroups();
