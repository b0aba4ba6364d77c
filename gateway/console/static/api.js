// The page's calls. Its actions use the gateway's public REST API under
// /v1, as any REST caller (the login cookie authenticates them); its views
// read /console/api. Every call resolves (never throws) to
// {ok, status, data}: data is the JSON answer, for a refusal
// {code, name, message}.

// A call the gateway has not answered within its time is given up (the
// gateway bounds its own work well within them): a connection that died
// without closing (a proxy or NAT that forgot it, a laptop that slept)
// held the call for ever, and with it a view that polls one call at a
// time (Groups) or a button waiting for its answer.
const VIEW_TIMEOUT_MS = 15000;
const ACTION_TIMEOUT_MS = 90000;

export async function post(path, body) {
  return call(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: JSON.stringify(body ?? {}),
    credentials: "same-origin",
  }, ACTION_TIMEOUT_MS);
}

export async function get(path) {
  return call(path, { headers: { Accept: "application/json" }, credentials: "same-origin" }, VIEW_TIMEOUT_MS);
}

async function call(path, init, timeoutMs) {
  let res;
  try {
    res = await fetch(path, { ...init, signal: AbortSignal.timeout(timeoutMs) });
    return { ok: res.ok, status: res.status, data: await answer(res) };
  } catch (err) {
    return networkError(err);
  }
}

const networkError = (err) =>
  ({ ok: false, status: 0, data: { code: -1, name: "NETWORK_ERROR", message: err.name === "TimeoutError"
    ? "the gateway did not answer in time" : `the gateway did not answer: ${err.message}` } });

async function answer(res) {
  try {
    return await res.json();
  } catch (err) {
    if (err.name === "TimeoutError" || err.name === "AbortError") throw err; // the call's, not the body's
    return { code: -1, name: `HTTP_${res.status}`, message: res.statusText || "answer was not JSON" };
  }
}

// signedIn asks the server whether this page may read the cluster: false
// when it answers 401 (authentication on, no session yet or an expired one).
export async function signedIn() {
  try {
    const res = await fetch("/console/api/config", { credentials: "same-origin", headers: { Accept: "application/json" },
      signal: AbortSignal.timeout(VIEW_TIMEOUT_MS) });
    return res.status !== 401;
  } catch {
    return true; // the server is down or silent: the stream says so
  }
}

// login opens a session with a REST token (POST /v1/login); the server
// answers with an HttpOnly cookie, which EventSource sends.
export const login = (token) => post("/v1/login", { token });

const enc = encodeURIComponent;
const ACKS = { all: -1, 1: 1, 0: 0 };

// records are count values "console HH:MM:SS.mmm #i" (base64, as REST
// takes bytes).
function records(count) {
  const stamp = new Date().toTimeString().slice(0, 8) + "." + String(Date.now() % 1000).padStart(3, "0");
  return Array.from({ length: count }, (_, i) => ({ value: btoa(`console ${stamp} #${i}`) }));
}

// itemRefusal turns a 200 whose one item was refused (REST answers
// ELECTION_NOT_NEEDED so: the leader already is the one asked for) into a
// refusal by that item's name.
function itemRefusal(res) {
  const r = res.ok && res.data.results && res.data.results[0];
  if (!r || !r.errorCode || r.errorCode === "ERROR_CODE_UNSPECIFIED") return res;
  const name = r.errorCode.replace(/^ERROR_CODE_/, "");
  return { ok: false, status: res.status, data: { code: -1, name, message: r.errorMessage || name } };
}

// configOps sets each config, or deletes it (back to the default) when
// its value is empty.
const configOps = (configs) => Object.entries(configs).map(([name, value]) =>
  value === "" ? { name, op: "CONFIG_OP_TYPE_DELETE" } : { name, value, op: "CONFIG_OP_TYPE_SET" });

export const actions = {
  node: (broker, action) => post(`/v1/dev/nodes/broker-${enc(broker)}:action`, { action: `ACTION_${action.toUpperCase()}` }),
  produce: (topic, partition, count, acks) => post(`/v1/topics/${enc(topic)}/partitions/${enc(partition)}/records`,
    { acks: ACKS[acks], timeoutMs: 10000, records: { records: records(count) } }),
  fault: (broker, topic, partition, fault) => post(`/v1/brokers/${enc(broker)}/faults`, { fault: { topic, partition, ...fault } }),
  clearFaults: (broker) => post(`/v1/brokers/${enc(broker)}/faults:clear`, {}),
  configs: (topic, configs) => post("/v1/configs:alter",
    { resources: [{ resource: { type: "CONFIG_RESOURCE_TYPE_TOPIC", name: topic }, ops: configOps(configs) }] }),
  elect: async (type, topic, partition) => itemRefusal(await post("/v1/elect-leaders",
    { electionType: `ELECTION_TYPE_${type.toUpperCase()}`, partitions: [{ topic, partition }], timeoutMs: 5000 })),
  scenarios: () => get("/console/api/scenarios"),
  runScenario,
  cancelScenario,
};

// The run this page started: its stream's abort. Closing the stream
// cancels the run (the launcher then heals the cluster); so does closing
// the page.
let running = null;

// runScenario starts a run (POST /v1/dev/scenarios/NAME:run, a stream of
// its timeline, one {"result": event} per line) and resolves with its first
// event; the page draws the run from the console's "scenario" events, as
// every other page does, and only keeps the stream open.
async function runScenario(name) {
  const ctl = new AbortController();
  let res;
  try {
    res = await fetch(`/v1/dev/scenarios/${enc(name)}:run`, {
      method: "POST", body: "{}", credentials: "same-origin", signal: ctl.signal,
      headers: { "Content-Type": "application/json", Accept: "application/json" },
    });
  } catch (err) {
    return networkError(err);
  }
  if (!res.ok) return { ok: false, status: res.status, data: await answer(res) };
  const reader = res.body.getReader();
  const text = new TextDecoder();
  let buf = "";
  while (!buf.includes("\n")) {
    let chunk;
    try {
      chunk = await reader.read();
    } catch (err) {
      return networkError(err);
    }
    if (chunk.done) break;
    buf += text.decode(chunk.value, { stream: true });
  }
  let first;
  try {
    first = JSON.parse(buf.split("\n")[0]);
  } catch {
    first = {};
  }
  if (!first.result) {
    ctl.abort();
    return { ok: false, status: res.status, data: first.error || { code: -1, name: "NO_RUN", message: "the run's stream ended before it began" } };
  }
  running = { ctl, name };
  const mine = running;
  (async () => {
    try {
      while (!(await reader.read()).done);
    } catch { /* aborted */ }
    if (running === mine) running = null;
  })();
  return { ok: true, status: res.status, data: first.result };
}

// cancelScenario ends the run this page started.
function cancelScenario() {
  if (!running) {
    return { ok: false, status: 0, data: { code: -1, name: "NOT_RUNNING", message: "no run started from this page is running" } };
  }
  const { ctl, name } = running;
  running = null;
  ctl.abort();
  return { ok: true, status: 200, data: { cancelled: name } };
}

// runningHere says whether this page holds the stream of the run.
export const runningHere = () => running !== null;
