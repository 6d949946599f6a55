// The device page: live view, counts, status, events, and the zone and line editor.
// Plain JavaScript, no build step and nothing fetched from elsewhere: everything is served by the agent.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { camera: null, cameras: [], zones: [], lines: [], fixed: { zones: [], lines: [] },
  mode: null, draft: null, drag: null, pickSide: null, seq: -1, frames: 0 };

function headers(write) {
  const h = {};
  const t = sessionStorage.getItem("edge-agent-token");
  if (t) h["Authorization"] = "Bearer " + t;
  if (write) { h["X-Edge-Agent"] = "1"; h["Content-Type"] = "application/json"; }
  return h;
}

async function api(path, opts) {
  const o = opts || {};
  const r = await fetch(path, { method: o.method || "GET", headers: headers(!!o.body), body: o.body });
  if (r.status === 401) { $("login").hidden = false; throw new Error("token needed"); }
  if (!r.ok) {
    let msg = r.status + "";
    try { msg = (await r.json()).error; } catch (e) { /* not JSON */ }
    throw new Error(msg);
  }
  return o.raw ? r : r.json();
}

function say(text, bad) {
  const m = $("message");
  m.textContent = text;
  m.className = bad ? "error" : "";
}

// ---- live view ------------------------------------------------------------------------------
async function refreshFrame() {
  if (!state.camera) return;
  try {
    const r = await api("/api/v1/live.jpg?camera=" + encodeURIComponent(state.camera), { raw: true });
    const seq = parseInt(r.headers.get("X-Frame-Seq") || "-1", 10);
    const blob = await r.blob();
    if (seq !== state.seq) {
      const img = $("live");
      const old = img.src;
      img.src = URL.createObjectURL(blob);
      if (old) URL.revokeObjectURL(old);
      state.seq = seq;
      state.frames += 1;
      img.dataset.seq = String(seq);
      img.dataset.frames = String(state.frames);
    }
  } catch (e) { /* the next poll tries again */ }
}

function sizeOverlay() {
  const img = $("live"), c = $("overlay");
  if (c.width !== img.clientWidth || c.height !== img.clientHeight) {
    c.width = img.clientWidth; c.height = img.clientHeight;
  }
  draw();
}

// ---- side panels ------------------------------------------------------------------------------
async function refreshPanels() {
  try {
    const counts = (await api("/api/v1/counts")).cameras[state.camera] || { lines: {}, zones: {} };
    const rows = [];
    for (const [n, c] of Object.entries(counts.lines)) rows.push(["line " + n, "in " + c.in + " / out " + c.out]);
    for (const [n, c] of Object.entries(counts.zones)) rows.push(["zone " + n, c.entered + " entered, " + c.occupancy + " now"]);
    const body = $("counts").tBodies[0];
    body.replaceChildren(...rows.map(([a, b]) => {
      const tr = document.createElement("tr");
      tr.dataset.name = a;
      for (const v of [a, b]) { const td = document.createElement("td"); td.textContent = v; tr.appendChild(td); }
      return tr;
    }));
    const s = await api("/api/v1/status");
    const cam = (s.cameras || {})[state.camera] || s.camera || {};
    const q = s.queue || {};
    const facts = {
      state: s.state, fps: s.fps, "camera fps in": cam.fps_in !== undefined ? cam.fps_in : cam.fps,
      backlog: q.pending, unconfirmed: q.inflight, "oldest unconfirmed s": q.oldest_unconfirmed_s,
      "disk free MB": q.disk_free_bytes !== undefined && q.disk_free_bytes !== null ? Math.round(q.disk_free_bytes / 1e6) : null,
      model: ((s.models || {}).detector || {}).id, provider: s.provider, broker: (s.broker || {}).state, errors: s.errors,
      warnings: (s.warnings || []).join("; ") || "none",
    };
    $("status").replaceChildren(...Object.entries(facts).flatMap(([k, v]) => {
      const dt = document.createElement("dt"); dt.textContent = k;
      const dd = document.createElement("dd"); dd.textContent = v === undefined || v === null ? "-" : String(v);
      return [dt, dd];
    }));
    $("health").textContent = (s.fps !== undefined ? s.fps + " fps" : "") + (s.state ? ", " + s.state : "");
    const ev = (await api("/api/v1/events?limit=15")).events.filter((e) => !e.camera || e.camera === state.camera || !state.named);
    $("events").replaceChildren(...ev.map((e) => {
      const li = document.createElement("li");
      const when = e.captured_at ? new Date(e.captured_at * 1000).toLocaleTimeString() : "";
      li.textContent = when + " " + (e.event || "result") + " " + (e.label || "") + (e.line ? " " + e.line + " " + e.direction : "") + (e.zone ? " " + e.zone : "");
      if (e.snapshot) {
        api(e.snapshot, { raw: true }).then((r) => r.blob()).then((b) => {
          const img = document.createElement("img"); img.src = URL.createObjectURL(b); li.appendChild(img);
        }).catch(() => {});
      }
      return li;
    }));
  } catch (e) { /* shown on the next round */ }
}

// ---- editor -----------------------------------------------------------------------------------
function frac(ev) {
  const c = $("overlay"), r = c.getBoundingClientRect();
  const x = Math.min(1, Math.max(0, (ev.clientX - r.left) / r.width));
  const y = Math.min(1, Math.max(0, (ev.clientY - r.top) / r.height));
  return [Math.round(x * 1000) / 1000, Math.round(y * 1000) / 1000];
}

function px(p) { const c = $("overlay"); return [p[0] * c.width, p[1] * c.height]; }

function sideOf(line, p) {  // "right" of points[0] -> points[1] as drawn on the image: (-dy, dx)
  const [a, b] = line.points;
  const cross = (b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0]);
  return cross > 0 ? "right" : "left";
}

function draw() {
  const c = $("overlay"), g = c.getContext("2d");
  g.clearRect(0, 0, c.width, c.height);
  g.lineWidth = 2; g.font = "13px sans-serif";
  for (const z of state.zones.concat(state.draft && state.draft.polygon ? [state.draft] : [])) {
    g.strokeStyle = "#ffc800"; g.beginPath();
    z.polygon.forEach((p, i) => { const [x, y] = px(p); i ? g.lineTo(x, y) : g.moveTo(x, y); });
    if (z !== state.draft) g.closePath();
    g.stroke();
    z.polygon.forEach((p) => { const [x, y] = px(p); g.fillStyle = "#ffc800"; g.fillRect(x - 4, y - 4, 8, 8); });
  }
  for (const ln of state.lines.concat(state.draft && state.draft.points ? [state.draft] : [])) {
    const [a, b] = ln.points.map(px);
    g.strokeStyle = "#ff00ff"; g.beginPath(); g.moveTo(a[0], a[1]); g.lineTo(b[0], b[1]); g.stroke();
    for (const q of [a, b]) { g.fillStyle = "#ff00ff"; g.fillRect(q[0] - 4, q[1] - 4, 8, 8); }
    const dx = b[0] - a[0], dy = b[1] - a[1], n = Math.max(Math.hypot(dx, dy), 1);
    const s = ln.in_side === "left" ? -1 : 1, mx = (a[0] + b[0]) / 2, my = (a[1] + b[1]) / 2;
    g.beginPath(); g.moveTo(mx, my); g.lineTo(mx - s * dy / n * 25, my + s * dx / n * 25); g.stroke();
    g.fillText("in", mx - s * dy / n * 32, my + s * dx / n * 32);
  }
}

function listItems() {
  const ul = $("items");
  ul.replaceChildren();
  const add = (kind, item, i) => {
    const li = document.createElement("li");
    const name = document.createElement("input");
    name.value = item.name; name.dataset.kind = kind; name.dataset.index = String(i);
    name.className = "item-name";
    name.addEventListener("input", () => { item.name = name.value; });
    li.append(kind === "lines" ? "line" : "zone", name);
    if (kind === "lines") {
      const flip = document.createElement("button");
      flip.type = "button"; flip.textContent = "in: " + (item.in_side || "right") + " (flip)";
      flip.addEventListener("click", () => { item.in_side = item.in_side === "left" ? "right" : "left"; listItems(); draw(); });
      li.append(flip);
    }
    const del = document.createElement("button");
    del.type = "button"; del.textContent = "delete";
    del.addEventListener("click", () => { state[kind].splice(i, 1); listItems(); draw(); });
    li.append(del);
    ul.appendChild(li);
  };
  state.lines.forEach((ln, i) => add("lines", ln, i));
  state.zones.forEach((z, i) => add("zones", z, i));
}

function freeName(kind, base) {
  const used = new Set(state[kind].concat(state.fixed[kind] || []).map((x) => x.name));
  let n = 1;
  while (used.has(base + n)) n += 1;
  return base + n;
}

function nearPoint(p) {  // a vertex within 10 px, to move it
  const c = $("overlay"), r = 10 / Math.max(c.width, 1);
  for (const item of state.lines.concat(state.zones)) {
    const pts = item.points || item.polygon;
    for (let i = 0; i < pts.length; i++) {
      if (Math.hypot(pts[i][0] - p[0], pts[i][1] - p[1]) < r) return { pts, i };
    }
  }
  return null;
}

function onDown(ev) {
  const p = frac(ev);
  if (state.pickSide) {
    state.pickSide.in_side = sideOf(state.pickSide, p);
    state.pickSide = null; $("hint").textContent = ""; listItems(); draw();
    return;
  }
  if (state.mode === "line") { state.draft = { name: freeName("lines", "line"), points: [p, p], in_side: "right" }; return; }
  if (state.mode === "zone") {
    if (!state.draft) state.draft = { name: freeName("zones", "zone"), polygon: [] };
    state.draft.polygon.push(p); draw();
    return;
  }
  state.drag = nearPoint(p);
}

function onMove(ev) {
  const p = frac(ev);
  if (state.mode === "line" && state.draft) { state.draft.points[1] = p; draw(); return; }
  if (state.drag) { state.drag.pts[state.drag.i] = p; draw(); }
}

function onUp(ev) {
  if (state.mode === "line" && state.draft) {
    const d = state.draft;
    d.points[1] = frac(ev);
    state.draft = null; state.mode = null;
    if (Math.hypot(d.points[1][0] - d.points[0][0], d.points[1][1] - d.points[0][1]) < 0.02) { draw(); return; }
    state.lines.push(d); state.pickSide = d;
    $("hint").textContent = "click the side of the line that is \"in\"";
    listItems(); draw();
    return;
  }
  state.drag = null;
}

function onDouble() {
  if (state.mode === "zone" && state.draft) {
    const z = state.draft;
    z.polygon.pop();  // the double click's second press added its point twice
    state.draft = null; state.mode = null; $("hint").textContent = "";
    if (z.polygon.length >= 3) state.zones.push(z);
    listItems(); draw();
  }
}

async function loadScene() {
  const s = await api("/api/v1/scene?camera=" + encodeURIComponent(state.camera));
  state.zones = s.zones; state.lines = s.lines; state.fixed = s.fixed; state.sceneCamera = s.camera;
  listItems(); draw();
}

async function save() {
  const edit = { camera: state.sceneCamera === undefined ? null : state.sceneCamera, zones: state.zones, lines: state.lines };
  try {
    const r = await api("/api/v1/scene", { method: "POST", body: JSON.stringify(edit) });
    say("saved to " + r.saved + (r.applied ? ", applied" : ", applied at the next frame"));
  } catch (e) { say(e.message, true); }
}

async function start() {
  $("login").addEventListener("submit", (ev) => {
    ev.preventDefault(); sessionStorage.setItem("edge-agent-token", $("token").value.trim());
    $("login").hidden = true; start();
  });
  let cams;
  try { cams = await api("/api/v1/cameras"); } catch (e) { say(e.message, true); return; }
  $("device").textContent = cams.device;
  state.cameras = cams.cameras; state.named = cams.cameras.length > 1;
  const sel = $("camera");
  sel.replaceChildren(...cams.cameras.map((c) => { const o = document.createElement("option"); o.value = c.id; o.textContent = c.id; return o; }));
  state.camera = cams.cameras[0].id;
  sel.addEventListener("change", () => { state.camera = sel.value; state.seq = -1; loadScene(); });
  const c = $("overlay");
  c.addEventListener("mousedown", onDown);
  c.addEventListener("mousemove", onMove);
  c.addEventListener("mouseup", onUp);
  c.addEventListener("dblclick", onDouble);
  $("live").addEventListener("load", sizeOverlay);
  window.addEventListener("resize", sizeOverlay);
  $("new-line").addEventListener("click", () => { state.mode = "line"; state.draft = null; $("hint").textContent = "drag from the first point to the second"; });
  $("new-zone").addEventListener("click", () => { state.mode = "zone"; state.draft = null; $("hint").textContent = "click the corners, double-click the last"; });
  $("save").addEventListener("click", save);
  $("revert").addEventListener("click", () => { loadScene(); say("reverted to the saved scene"); });
  await loadScene();
  setInterval(refreshFrame, 1000 / (cams.live_fps || 2));
  setInterval(refreshPanels, 2000);
  refreshFrame(); refreshPanels();
}

start();
