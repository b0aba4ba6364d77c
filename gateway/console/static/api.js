// Calls to the console's action API. Every call resolves (never throws)
// to {ok, status, data}: data is the JSON answer, for a refusal
// {code, name, message}.

export async function post(path, body) {
  return call(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: JSON.stringify(body ?? {}),
    credentials: "same-origin",
  });
}

export async function get(path) {
  return call(path, { headers: { Accept: "application/json" }, credentials: "same-origin" });
}

async function call(path, init) {
  let res;
  try {
    res = await fetch(path, init);
  } catch (err) {
    return { ok: false, status: 0, data: { code: -1, name: "NETWORK_ERROR", message: `the console server did not answer: ${err.message}` } };
  }
  let data = null;
  try {
    data = await res.json();
  } catch {
    data = { code: -1, name: `HTTP_${res.status}`, message: res.statusText || "answer was not JSON" };
  }
  return { ok: res.ok, status: res.status, data };
}

// signedIn asks the server whether this page may read the cluster: false
// when it answers 401 (authentication on, no session yet or an expired one).
export async function signedIn() {
  try {
    const res = await fetch("/console/api/config", { credentials: "same-origin", headers: { Accept: "application/json" } });
    return res.status !== 401;
  } catch {
    return true; // the server is down: the stream says so
  }
}

// login opens a session with a REST token (POST /v1/login); the server
// answers with an HttpOnly cookie, which EventSource sends.
export const login = (token) => post("/v1/login", { token });

export const actions = {
  node: (broker, action) => post(`/console/api/brokers/${encodeURIComponent(broker)}/${encodeURIComponent(action)}`, {}),
  produce: (topic, partition, count, acks) => post("/console/api/produce", { topic, partition, count, acks }),
  fault: (broker, topic, partition, fault) => post("/console/api/faults", { broker, topic, partition, ...fault }),
  clearFaults: (broker) => post("/console/api/faults/clear", { broker }),
  configs: (topic, configs) => post(`/console/api/topics/${encodeURIComponent(topic)}/configs`, { configs }),
  elect: (type, topic, partition) => post("/console/api/elections", { type, topic, partition }),
  scenarios: () => get("/console/api/scenarios"),
  runScenario: (name) => post(`/console/api/scenarios/${encodeURIComponent(name)}/run`, {}),
  cancelScenario: () => post("/console/api/scenarios/cancel", {}),
};
