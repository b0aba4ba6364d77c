// Small DOM helpers: elements are built with properties and children, never
// from HTML strings, so names coming from the cluster are always text.

const SVG_NS = "http://www.w3.org/2000/svg";

function apply(el, props, isSvg) {
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") {
      el.setAttribute("class", Array.isArray(v) ? v.filter(Boolean).join(" ") : v);
    } else if (k.startsWith("on") && typeof v === "function") {
      el.addEventListener(k.slice(2), v);
    } else if (k === "text") {
      el.textContent = v;
    } else if (!isSvg && (k === "value" || k === "checked" || k === "disabled" || k === "selected")) {
      el[k] = v;
    } else {
      el.setAttribute(k, v === true ? "" : String(v));
    }
  }
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// h builds an HTML element: h("div", {class: "x", "data-id": 3}, "text", child).
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  apply(el, props, false);
  append(el, children);
  return el;
}

// s builds an SVG element.
export function s(tag, props, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  apply(el, props, true);
  append(el, children);
  return el;
}

// fill replaces an element's children.
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// keyed keeps one child per key in container, in the order of items:
// make(item) builds a new child, update(child, item) refreshes it, and
// children whose key is gone are removed.
export function keyed(container, items, key, make, update) {
  const have = new Map();
  for (const el of container.children) have.set(el.dataset.key, el);
  let prev = null;
  for (const item of items) {
    const k = String(key(item));
    let el = have.get(k);
    if (!el) {
      el = make(item);
      el.dataset.key = k;
    }
    have.delete(k);
    update(el, item);
    const want = prev ? prev.nextSibling : container.firstChild;
    if (el !== want) container.insertBefore(el, want);
    prev = el;
  }
  for (const el of have.values()) el.remove();
}

export function fmtTime(ms, withMs = true) {
  const d = new Date(ms);
  const p = (n, w = 2) => String(n).padStart(w, "0");
  const t = `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
  return withMs ? `${t}.${p(d.getMilliseconds(), 3)}` : t;
}

export function fmtLag(ms) {
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.round(ms / 1000)} s`;
}

export function setList(list) {
  return list && list.length ? list.join(",") : "";
}
