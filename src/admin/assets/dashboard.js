// Shellac dashboard: polls /api/dashboard every second and draws the charts on canvas.
// No libraries; everything ships inside the shellac binary.
"use strict";

const COLORS = { a: "#5ab0ff", b: "#f0a35e", c: "#7bd88f", d: "#e06c75", grid: "#2a323c", dim: "#8a96a3" };
let updates = 0;
let token = sessionStorage.getItem("shellac-token");
// The site whose top URLs are shown ("" for all); `?site=NAME` in the page's address picks one.
let topSite = new URLSearchParams(location.search).get("site") || "";

function human(n, unit) {
  if (n === null || n === undefined || Number.isNaN(n)) return "–";
  const steps = unit === "B" ? [[1 << 30, "GiB"], [1 << 20, "MiB"], [1 << 10, "KiB"]] : [[1e9, "G"], [1e6, "M"], [1e3, "k"]];
  for (const [size, name] of steps) if (Math.abs(n) >= size) return (n / size).toFixed(1) + " " + name + (unit === "B" ? "" : unit);
  return (Math.round(n * 10) / 10) + (unit === "B" ? " B" : unit);
}
// Units of each kind of axis, largest first: every label of one axis uses one of them.
const UNITS = {
  count: [[1e9, " G"], [1e6, " M"], [1e3, " k"], [1, ""]],
  bytes: [[1 << 30, " GiB"], [1 << 20, " MiB"], [1 << 10, " KiB"], [1, " B"]],
  micros: [[1e6, " s"], [1e3, " ms"], [1, " µs"]],
};
// Decimals needed to write multiples of `q` exactly (0.25 → 2, 2.5 → 1, 5 → 0).
function decimals(q) {
  let d = 0;
  while (d < 6 && Math.abs(Math.round(q * 10 ** d) - q * 10 ** d) > 1e-6) d++;
  return d;
}
// A scale from 0 to at least `max` in about four round steps (1, 2, 2.5 or 5 times a power of
// ten of the axis' unit, which the largest value chooses; "59 / 44.3 / 29.5" was max / 4):
// { top, ticks: [[value, label]] }.
function scale(max, kind) {
  if (kind === "ratio") return { top: 1, ticks: [0, 0.25, 0.5, 0.75, 1].map(v => [v, v * 100 + "%"]) };
  const units = UNITS[kind];
  if (!(max > 0)) max = 4;
  const [div, suffix] = units.find(([d]) => max >= d) || units[units.length - 1];
  const scaled = max / div, raw = scaled / 4, mag = 10 ** Math.floor(Math.log10(raw));
  // Never a fraction of the smallest unit (no 0.25 µs, no 0.5 B).
  const step = Math.max([1, 2, 2.5, 5, 10].map(m => m * mag).find(v => v >= raw - 1e-12), 1 / div);
  const n = Math.max(1, Math.ceil(scaled / step - 1e-9));
  const places = decimals(step);
  const ticks = [];
  for (let i = 0; i <= n; i++) ticks.push([i * step * div, (i * step).toFixed(places) + suffix]);
  return { top: n * step * div, ticks };
}
function percent(r) { return r === null || r === undefined ? "–" : (r * 100).toFixed(1) + "%"; }
function uptime(s) {
  const d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
  return (d ? d + "d " : "") + String(h).padStart(2, "0") + ":" + String(m).padStart(2, "0") + ":" + String(s % 60).padStart(2, "0");
}

// Seconds without a value (no request, so no hit ratio or TTFB) a line is carried over.
const CARRY_SECONDS = 5;

// Draws lines for `series` ([{values, color}]) over times `t` (unix seconds) on an axis of
// `kind` (count, bytes, micros, ratio). `carry`: a few seconds without a value keep the last
// one, so sparse traffic draws a line, not dots; a longer stretch without requests is a gap
// (there was no sample: never drawn as a value, least of all as 0). A value alone between
// gaps (a path of one point strokes nothing) is drawn as a dot.
function chart(id, t, series, kind, carry) {
  const canvas = document.getElementById(id);
  const ratio = window.devicePixelRatio || 1;
  const w = canvas.clientWidth || 400, h = canvas.clientHeight || 160;
  canvas.width = w * ratio; canvas.height = h * ratio;
  const g = canvas.getContext("2d");
  g.scale(ratio, ratio);
  g.clearRect(0, 0, w, h);
  const left = 64, right = 8, top = 8, bottom = 18;
  let max = 0;
  for (const s of series) for (const v of s.values) if (v !== null && v > max) max = v;
  const axis = scale(max, kind);
  const span = Math.max(60, t.length ? t[t.length - 1] - t[0] : 60);
  const end = t.length ? t[t.length - 1] : 0;
  const x = ts => left + (w - left - right) * (1 - (end - ts) / span);
  const y = v => top + (h - top - bottom) * (1 - v / axis.top);
  g.strokeStyle = COLORS.grid; g.fillStyle = COLORS.dim; g.font = "11px system-ui, sans-serif"; g.lineWidth = 1;
  for (const [v, label] of axis.ticks) {
    const yy = y(v);
    g.beginPath(); g.moveTo(left, yy); g.lineTo(w - right, yy); g.stroke();
    g.fillText(label, 4, yy + 4);
  }
  g.fillText("-" + Math.round(span) + " s", left, h - 4);
  g.fillText("now", w - right - 22, h - 4);
  let points = 0, segments = 0, dots = 0, lowest = null;
  for (const s of series) {
    g.strokeStyle = s.color; g.fillStyle = s.color; g.lineWidth = 1.6; g.beginPath();
    let pen = false, last = null, lastAt = null, run = 0, at = null;
    // The pen lifts: a segment of one point becomes a dot.
    const lift = () => {
      if (pen && run === 1) { g.fillRect(at[0] - 1.5, at[1] - 1.5, 3, 3); dots++; }
      pen = false; run = 0;
    };
    s.values.forEach((v, i) => {
      if (v === null || v === undefined) {
        if (!carry || last === null || t[i] - lastAt > CARRY_SECONDS) { lift(); return; }
        v = last;
      } else {
        last = v; lastAt = t[i];
      }
      if (lowest === null || v < lowest) lowest = v;
      const px = x(t[i]), py = y(v);
      if (pen) g.lineTo(px, py); else { g.moveTo(px, py); segments++; }
      pen = true; points++; run++; at = [px, py];
    });
    lift();
    g.stroke();
  }
  // For the headless-browser test: what was drawn and the axis' labels.
  canvas.dataset.points = points;
  canvas.dataset.segments = segments;
  canvas.dataset.dots = dots;
  canvas.dataset.lowest = lowest === null ? "" : lowest;
  canvas.dataset.ticks = axis.ticks.map(([, label]) => label).join("|");
}

function cell(text, cls) { const td = document.createElement("td"); td.textContent = text; if (cls) td.className = cls; return td; }

function render(d) {
  const s = d.series;
  document.getElementById("uptime").textContent = uptime(d.uptime_seconds);
  document.getElementById("hr10").textContent = percent(d.hit_ratio["10s"]);
  document.getElementById("hr100").textContent = percent(d.hit_ratio["100s"]);
  document.getElementById("hr1000").textContent = percent(d.hit_ratio["1000s"]);
  document.getElementById("requests").textContent = d.totals.client_req;
  document.getElementById("conns").textContent =
    d.totals.n_client_conn + " open, " + d.totals.n_client_conn_released + " of them idle";
  chart("chart-req", s.t, [{ values: s.req_per_s, color: COLORS.a }, { values: s.backend_errors_per_s, color: COLORS.d }], "count");
  chart("chart-hit", s.t, [{ values: s.hit_ratio, color: COLORS.c }], "ratio", true);
  chart("chart-bytes", s.t, [{ values: s.bytes_per_s, color: COLORS.b }], "bytes");
  chart("chart-ttfb", s.t, [{ values: s.ttfb_p50_us, color: COLORS.c }, { values: s.ttfb_p90_us, color: COLORS.a }, { values: s.ttfb_p99_us, color: COLORS.d }], "micros", true);
  chart("chart-storage", s.t, [{ values: s.cache_bytes, color: COLORS.a }], "bytes");
  const st = d.storage;
  document.getElementById("storage-text").textContent =
    human(st.bytes, "B") + " of " + human(st.capacity, "B") + " · " + st.objects + " objects · " + st.evicted + " evicted";
  document.getElementById("storage-bar").style.width = (st.capacity ? 100 * st.bytes / st.capacity : 0).toFixed(1) + "%";
  const fleet = d.fleet;
  document.getElementById("fleet-panel").hidden = !fleet;
  if (fleet) {
    // A refusal of the credentials is a configuration error: red, above everything else.
    const auth = document.getElementById("fleet-auth");
    auth.hidden = !fleet.auth_error;
    auth.textContent = fleet.auth_error ? "Configuration error: the Redis cluster refuses the shared tier (" +
      fleet.auth_error.count + " times): " + fleet.auth_error.fix + " — Redis said: " + fleet.auth_error.error : "";
    document.getElementById("fleet-text").textContent =
      "node " + fleet.node + " · breaker " + fleet.breaker + " · " + fleet.hits + " shared hits · " + fleet.writes +
      " writes · " + (fleet.errors + fleet.timeouts) + " errors · invalidation lag " + fleet.lag_ms + " ms" +
      (fleet.outbox ? " · " + fleet.outbox + " queued" : "");
    fetch("/fleet", { headers: token ? { Authorization: "Bearer " + token } : {}, cache: "no-store" }).then(r => r.ok ? r.json() : null).then(f => {
      if (!f || !f.nodes) return;
      document.getElementById("fleet-nodes").replaceChildren(...f.nodes.map(n => {
        const tr = document.createElement("tr");
        tr.append(cell(n.name), cell(n.position), cell(n.lag_ms, "num"), cell(n.heartbeat_age_ms, n.live ? "num" : "num sick"));
        return tr;
      }));
    }).catch(() => {});
  }
  const backends = document.getElementById("backends");
  backends.replaceChildren(...d.backends.map(b => {
    const tr = document.createElement("tr");
    const health = b.probe ? (b.healthy ? "healthy " : "sick ") + b.probe.good + "/" + b.probe.window : (b.healthy ? "healthy" : "sick");
    tr.append(cell(b.name), cell(b.address), cell(health, b.healthy ? "ok" : "sick"), cell(b.in_flight, "num"),
      cell(b.idle, "num"), cell(b.req, "num"), cell((b.fail || 0) + (b.error || 0), "num"));
    return tr;
  }));
  const tls = d.tls || { certificates: [], failures: {} };
  const certs = tls.certificates;
  document.getElementById("tls-panel").hidden = certs.length === 0;
  const reasons = Object.entries(tls.failures).map(([r, n]) => r + " " + n).join(", ");
  document.getElementById("tls-handshakes").textContent =
    "handshakes " + tls.handshakes + " (" + tls.resumed + " resumed) · failed " + tls.failed +
    (reasons ? " (" + reasons + ")" : "");
  document.getElementById("tls").replaceChildren(...certs.map(c => {
    const tr = document.createElement("tr");
    tr.append(cell(c.listener), cell(c.names), cell(c.key), cell(c.not_after),
      cell(c.days_left, c.days_left < 14 ? "num sick" : "num"));
    return tr;
  }));
  const sites = d.sites || [];
  document.getElementById("sites-panel").hidden = sites.length === 0;
  document.getElementById("sites").replaceChildren(...sites.map(x => {
    const tr = document.createElement("tr");
    tr.append(cell(x.name), cell(x.req, "num"), cell(x.hit, "num"), cell(x.miss, "num"), cell(x.pass, "num"),
      cell(x.rewrite, "num"), cell(percent(x.hit_ratio), "num"));
    return tr;
  }));
  // The top URLs of all requests or of one site's (issue 31).
  const pick = document.getElementById("top-site");
  pick.hidden = sites.length === 0;
  const names = sites.map(x => x.name);
  if (pick.dataset.names !== names.join("\n")) {
    pick.dataset.names = names.join("\n");
    const all = document.createElement("option"); all.value = ""; all.textContent = "all sites";
    pick.replaceChildren(all, ...names.map(n => { const o = document.createElement("option"); o.value = n; o.textContent = n; return o; }));
    pick.value = names.includes(topSite) ? topSite : "";
  }
  const top = document.getElementById("top");
  top.replaceChildren(...d.top_urls.map(r => {
    const tr = document.createElement("tr");
    const key = cell(r.key, "key"); key.title = r.key;
    tr.append(key, cell(r.requests, "num"), cell(r.misses, "num"), cell(human(r.bytes, "B"), "num"));
    return tr;
  }));
  updates++;
  document.body.dataset.updates = updates;
  // Panels whose content is wider than the panel (a table cut off behind a scroll bar), for
  // the headless-browser test.
  document.body.dataset.clipped = [...document.querySelectorAll("section")]
    .filter(s => s.scrollWidth > s.clientWidth + 1)
    .map(s => s.querySelector("h2").textContent).join(",");
  document.body.dataset.requests = d.totals.client_req;
  // Rows of panels that stop short of the page's right edge (an empty grid cell), for the
  // headless-browser test.
  const main = document.querySelector("main");
  const edge = main.getBoundingClientRect().right - parseFloat(getComputedStyle(main).paddingRight);
  const rows = new Map();
  for (const p of main.querySelectorAll("section")) {
    if (p.hidden) continue;
    const r = p.getBoundingClientRect(), row = Math.round(r.top);
    rows.set(row, Math.max(rows.get(row) || 0, r.right));
  }
  document.body.dataset.holes = [...rows.values()].filter(r => edge - r > 2).length;
}

async function poll() {
  const status = document.getElementById("status");
  try {
    const headers = token ? { Authorization: "Bearer " + token } : {};
    const resp = await fetch("/api/dashboard" + (topSite ? "?site=" + encodeURIComponent(topSite) : ""), { headers, cache: "no-store" });
    if (resp.status === 401) {
      token = window.prompt("Shellac admin token");
      if (token) sessionStorage.setItem("shellac-token", token);
      throw new Error("admin token required");
    }
    if (!resp.ok) throw new Error("HTTP " + resp.status);
    render(await resp.json());
    status.textContent = "live · " + new Date().toLocaleTimeString();
    status.className = "";
  } catch (e) {
    status.textContent = "not updating: " + e.message;
    status.className = "error";
  }
}

document.getElementById("top-site").addEventListener("change", e => { topSite = e.target.value; poll(); });
poll();
setInterval(poll, 1000);
