// Lethe console: a small single-page app over the intake's JSON API. The token lives in
// sessionStorage and goes out as Authorization: Bearer. Typed identifiers (subject and
// session ids) are sent in POST bodies only and never put in a URL or the title; forms
// that hold them are cleared after use.
"use strict";

const TOKEN = "lethe.token";
const FINAL = ["COMPLETE", "PARTIAL", "CANCELLED", "REJECTED", "PREVIEWED"];
const STATES = ["PENDING", "IN_PROGRESS", "FAILED", "COMPLETE", "PARTIAL", "PREVIEWED", "SCHEDULED",
  "CANCELLED", "AWAITING_APPROVAL", "REJECTED"];
let me = null;
let poll = null;

const $ = (sel, root = document) => root.querySelector(sel);
const main = () => $("#main");

// el builds an element: el("td", {class: "x"}, "text", child...). Text is never parsed as HTML.
function el(tag, attrs = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const k of kids.flat()) {
    if (k === null || k === undefined) continue;
    e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return e;
}

// put replaces the children of node by kids, arrays flattened.
function put(node, ...kids) { node.replaceChildren(...kids.flat(3).filter(k => k !== null && k !== undefined)); }

function toast(msg, bad) {
  const t = $("#toast");
  t.textContent = msg;
  t.className = bad ? "bad show" : "show";
  setTimeout(() => { t.className = ""; }, 4000);
}

async function api(method, path, body) {
  const headers = { "Authorization": "Bearer " + sessionStorage.getItem(TOKEN) };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  let data = null;
  try { data = await r.json(); } catch (_) { data = null; }
  if (r.status === 401) { logout(); throw new Error("unauthenticated"); }
  if (!r.ok) throw new Error((data && data.error) || ("HTTP " + r.status));
  return data;
}

function logout() {
  sessionStorage.removeItem(TOKEN);
  me = null;
  location.hash = "#/login";
  route();
}

function sla(st) {
  if (FINAL.includes(st.state)) return el("span", { class: "sla done" }, "—");
  const ms = new Date(st.due_at) - Date.now();
  const abs = Math.abs(ms), d = Math.floor(abs / 86400000), h = Math.floor(abs % 86400000 / 3600000);
  const m = Math.floor(abs % 3600000 / 60000);
  const txt = (d ? d + "d " : "") + h + "h " + m + "m";
  return ms < 0 || st.overdue ? el("span", { class: "sla overdue" }, "overdue by " + txt) : el("span", { class: "sla" }, "due in " + txt);
}

function badge(state) { return el("span", { class: "badge s-" + state, "data-state": state }, state); }

function tenantSelect(name, withAll) {
  const s = el("select", { name, id: name });
  if (withAll) s.append(el("option", { value: "" }, "all my tenants"));
  for (const t of me.tenants.filter(t => t !== "*")) s.append(el("option", { value: t }, t));
  return s;
}

// ---- pages ----

function loginPage() {
  $("#nav").hidden = true; $("#logout").hidden = true; $("#who").textContent = "";
  const f = el("form", { id: "login", class: "card", autocomplete: "off" },
    el("h2", {}, "Log in"),
    el("label", {}, "Token or JWT", el("input", { type: "password", name: "token", id: "token", required: true })),
    el("button", { type: "submit" }, "Log in"));
  f.addEventListener("submit", async ev => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN, f.token.value.trim());
    f.reset();
    try { await whoami(); location.hash = "#/requests"; } catch (e) { sessionStorage.removeItem(TOKEN); toast("log in failed: " + e.message, true); }
  });
  put(main(), f);
}

async function whoami() {
  me = await api("GET", "/v1/whoami");
  $("#who").textContent = me.name + " · " + me.tenants.join(", ") + (me.roles.length ? " · " + me.roles.join(", ") : "");
  $("#nav").hidden = false; $("#logout").hidden = false;
}

async function requestsPage() {
  const filters = el("form", { id: "filters", class: "filters" },
    el("label", {}, "Tenant ", tenantSelect("tenant", true)),
    el("label", {}, "State ", el("select", { name: "state" }, el("option", { value: "" }, "any"), STATES.map(s => el("option", { value: s }, s)))),
    el("label", {}, "Regulation ", el("select", { name: "regulation" }, ["", "GDPR", "LGPD", "PDPA", "CCPA"].map(r => el("option", { value: r }, r || "any")))),
    el("label", {}, el("input", { type: "checkbox", name: "overdue" }), " overdue only"));
  const table = el("table", { id: "requests" });
  put(main(), el("h2", {}, "Requests"), filters, table);
  const load = async () => {
    const q = new URLSearchParams();
    const tenant = filters.tenant.value || (me.tenants.length === 1 && me.tenants[0] !== "*" ? me.tenants[0] : "");
    if (tenant) q.set("tenant", tenant);
    if (filters.state.value) q.set("state", filters.state.value);
    if (filters.overdue.checked) q.set("overdue", "true");
    let list;
    try { list = (await api("GET", "/v1/erasures?" + q)).requests; } catch (e) { put(table, el("tr", {}, el("td", {}, e.message))); return; }
    if (!tenant && !me.tenants.includes("*")) {
      // A principal of several tenants lists each of them.
      list = [];
      for (const t of me.tenants) list.push(...(await api("GET", "/v1/erasures?tenant=" + encodeURIComponent(t) + (filters.state.value ? "&state=" + filters.state.value : "") + (filters.overdue.checked ? "&overdue=true" : ""))).requests);
    }
    if (filters.regulation.value) list = list.filter(r => r.regulation === filters.regulation.value);
    put(table, el("tr", {}, ["Request", "Tenant", "Scope", "Regulation", "State", "Stores", "SLA"].map(h => el("th", {}, h))),
      list.map(r => el("tr", { "data-request": r.request_id },
        el("td", {}, el("a", { href: "#/request/" + r.request_id }, r.request_id)),
        el("td", {}, r.tenant_id), el("td", {}, r.scope), el("td", {}, r.regulation), el("td", {}, badge(r.state)),
        el("td", {}, r.stores.filter(s => s.status !== "PENDING").length + "/" + r.stores.length),
        el("td", {}, sla(r)))));
    if (!list.length) table.append(el("tr", {}, el("td", { colspan: 7 }, "No request.")));
  };
  filters.addEventListener("change", load);
  await load();
}

function submitPage() {
  const f = el("form", { id: "submit", class: "card", autocomplete: "off" },
    el("h2", {}, "Submit an erasure"),
    el("label", {}, "Tenant ", tenantSelect("tenant_id", false)),
    el("label", {}, "Scope ", el("select", { name: "scope" }, el("option", { value: "SUBJECT" }, "SUBJECT"), el("option", { value: "TENANT" }, "TENANT (offboarding)"))),
    el("label", {}, "Subject id ", el("input", { name: "subject_id", autocomplete: "off" })),
    el("label", {}, "Session ids (comma-separated) ", el("input", { name: "session_ids", autocomplete: "off" })),
    el("label", {}, "Regulation ", el("select", { name: "regulation" }, ["GDPR", "LGPD", "PDPA", "CCPA"].map(r => el("option", { value: r }, r)))),
    el("label", {}, el("input", { type: "checkbox", name: "dry_run" }), " dry run (count only, delete nothing)"),
    el("button", { type: "submit" }, "Submit"));
  f.addEventListener("submit", async ev => {
    ev.preventDefault();
    const tenant = f.tenant_id.value || (me.tenants[0] === "*" ? "" : me.tenants[0]);
    const body = { tenant_id: tenant, regulation: f.regulation.value, scope: f.scope.value, dry_run: f.dry_run.checked };
    if (f.scope.value === "SUBJECT") {
      body.subject_id = f.subject_id.value;
      body.session_ids = f.session_ids.value.split(",").map(s => s.trim()).filter(Boolean);
    }
    f.subject_id.value = ""; f.session_ids.value = "";
    try {
      const acc = await api("POST", "/v1/erasures", body);
      toast("accepted " + acc.request_id);
      location.hash = "#/request/" + acc.request_id;
    } catch (e) { toast("refused: " + e.message, true); }
  });
  put(main(), f);
}

function storeRow(s) {
  const v = s.verification || {};
  return el("tr", { "data-store": s.store, "data-status": s.status },
    el("td", {}, s.store), el("td", {}, badge(s.status)), el("td", {}, s.deleted), el("td", {}, s.status === "PENDING" ? "" : s.remaining),
    el("td", {}, s.unexamined || 0), el("td", {}, v.mentions || 0), el("td", {}, (v.similar || []).length),
    el("td", {}, v.attestation || ""), el("td", { class: "small" }, v.method || ""), el("td", { class: "small" }, s.error || ""));
}

async function requestPage(id) {
  const head = el("div", { id: "request-head" });
  const actions = el("div", { id: "actions", class: "actions" });
  const progress = el("progress", { id: "progress", max: 1, value: 0 });
  const stores = el("table", { id: "stores" });
  const timeline = el("ol", { id: "timeline" });
  const receipt = el("section", { id: "receipt" });
  const redrive = el("section", { id: "redrive" });
  put(main(), head, actions, el("h3", {}, "Stores"), progress, stores, el("h3", {}, "Timeline"), timeline, receipt, redrive);
  let shownReceipt = false;
  const render = async () => {
    let st;
    try { st = await api("GET", "/v1/erasures/" + encodeURIComponent(id)); } catch (e) { put(head, el("p", { class: "bad" }, e.message)); stopPoll(); return; }
    put(head, el("h2", {}, "Request ", el("code", {}, st.request_id), " ", badge(st.state)),
      el("p", {}, `${st.tenant_id} · ${st.scope} · ${st.regulation} · requested ${new Date(st.requested_at).toLocaleString()} · `, sla(st),
        st.workflow && st.workflow.execute_at && st.state === "SCHEDULED" ? " · runs at " + new Date(st.workflow.execute_at).toLocaleString() : ""));
    const done = st.stores.filter(s => s.status !== "PENDING").length;
    progress.max = st.stores.length; progress.value = done;
    put(stores, el("tr", {}, ["Store", "Status", st.state === "PREVIEWED" ? "Would delete" : "Deleted", "Remaining", "Unexamined", "Mentions", "Similar", "Attestation", "Verification", "Error"].map(h => el("th", {}, h))),
      st.stores.map(storeRow));
    put(actions, ...actionButtons(st, render));
    const events = [];
    for (const h of (st.workflow && st.workflow.history) || []) events.push([h.at, `${h.action || "submitted"} → ${h.to} by ${h.actor}`]);
    if (!st.workflow) events.push([st.requested_at, "submitted"]);
    for (const s of st.stores) if (s.finished_at) events.push([s.finished_at, `${s.store}: ${s.status}${s.attempt ? " (attempt " + s.attempt + ")" : ""}`]);
    events.sort((a, b) => new Date(a[0]) - new Date(b[0]));
    put(timeline, ...events.map(([at, what]) => el("li", {}, el("time", {}, new Date(at).toLocaleTimeString()), " ", what)));
    if (st.receipt_id && !shownReceipt) { shownReceipt = true; await showReceipt(st, receipt); }
    const failed = st.stores.filter(s => s.status === "FAILED").map(s => s.store);
    put(redrive, ...(failed.length && st.state !== "PREVIEWED" ? [redriveForm(st, failed, render)] : []));
    if (FINAL.includes(st.state) && shownReceipt === !!st.receipt_id) stopPoll();
  };
  await render();
  startPoll(render);
}

function actionButtons(st, render) {
  const verb = (label, path, cls) => el("button", { class: cls || "", "data-action": path, onclick: async () => {
    try { await api("POST", "/v1/erasures/" + encodeURIComponent(st.request_id) + "/" + path); toast(label + ": done"); startPoll(render); await render(); }
    catch (e) { toast(label + " refused: " + e.message, true); }
  } }, label);
  const out = [];
  if (st.state === "PREVIEWED") out.push(verb("Confirm erasure", "confirm", "danger"));
  if (st.state === "SCHEDULED" || st.state === "AWAITING_APPROVAL") out.push(verb("Cancel", "cancel"));
  if (st.state === "AWAITING_APPROVAL") out.push(verb("Approve", "approve", "danger"), verb("Reject", "reject"));
  return out;
}

function redriveForm(st, failed, render) {
  const f = el("form", { id: "redrive-form", class: "card", autocomplete: "off" },
    el("h3", {}, "Re-drive failed stores: " + failed.join(", ")),
    st.scope === "SUBJECT" ? [el("label", {}, "Subject id ", el("input", { name: "subject_id", autocomplete: "off" })),
      el("label", {}, "Session ids ", el("input", { name: "session_ids", autocomplete: "off" }))] : [],
    el("button", { type: "submit" }, "Re-drive"));
  f.addEventListener("submit", async ev => {
    ev.preventDefault();
    const body = { stores: failed, subject_id: f.subject_id ? f.subject_id.value : "", session_ids: f.session_ids ? f.session_ids.value.split(",").map(s => s.trim()).filter(Boolean) : [] };
    f.reset();
    try { await api("POST", "/v1/erasures/" + encodeURIComponent(st.request_id) + "/retry", body); toast("re-driven"); startPoll(render); }
    catch (e) { toast("re-drive refused: " + e.message, true); }
  });
  return f;
}

async function showReceipt(st, box) {
  const rc = await api("GET", "/v1/erasures/" + encodeURIComponent(st.request_id) + "/receipt");
  const chain = await api("GET", "/v1/tenants/" + encodeURIComponent(st.tenant_id) + "/chain");
  put(box, el("h3", {}, "Receipt"),
    el("p", { id: "chain", class: chain.verified ? "ok" : "bad", "data-verified": String(chain.verified) },
      chain.verified ? `Chain verified: ${chain.receipts} receipts of ${chain.tenant_id} recomputed and linked` : "Chain NOT verified: " + chain.error),
    el("p", {}, `Receipt ${rc.receipt_id} · status `, badge(rc.status), ` · seq ${rc.seq} · hash `, el("code", { class: "small" }, rc.hash)),
    el("table", { id: "receipt-stores" }, el("tr", {}, ["Store", "Kind", "Status", "Deleted", "Method", "Remaining", "Unexamined", "Mentions", "Similar", "Attestation"].map(h => el("th", {}, h))),
      rc.stores.map(s => el("tr", {}, el("td", {}, s.store), el("td", {}, s.kind), el("td", {}, badge(s.status)), el("td", {}, s.deleted),
        el("td", { class: "small" }, s.verification.method), el("td", {}, s.verification.remaining), el("td", {}, s.verification.unexamined || 0),
        el("td", {}, s.verification.mentions || 0), el("td", {}, (s.verification.similar || []).length), el("td", {}, s.verification.attestation || "")))),
    reviewSection(rc),
    el("details", {}, el("summary", {}, "Receipt JSON"), el("pre", {}, JSON.stringify(rc, null, 2))));
}

// reviewSection lists the items the receipt left for review (probable untagged copies)
// with the decision the chain records for each, and offers to erase or dismiss an
// undecided one (the intake allows it to approvers only). Each decision is recorded as an
// addendum of the receipt; it stands unless the erasure it asked for failed.
function reviewSection(rc) {
  const box = el("section", { id: "review" });
  const items = rc.review || [];
  if (!items.length) return box;
  // settled: the decision of review pass is recorded and, for an erase, its outcome too.
  const settled = (addenda, pass) => {
    const of = addenda.filter(a => a.pass === pass);
    return of.some(a => a.type === "REVIEWED" && a.review.decision === "DISMISS") || of.some(a => a.type === "ITEM_ERASED" || a.type === "UNVERIFIED");
  };
  const load = async () => {
    const addenda = (await api("GET", "/v1/erasures/" + encodeURIComponent(rc.request_id) + "/addenda")).addenda;
    const decided = (it, type) => addenda.find(a => a.type === type && a.review && a.review.store === it.store && a.review.item === it.item);
    const row = it => {
      const failed = addenda.filter(a => a.type === "UNVERIFIED" && a.purpose === "REVIEW").map(a => a.pass);
      const d = addenda.filter(a => a.type === "REVIEWED" && a.review && a.review.store === it.store && a.review.item === it.item)
        .find(a => !failed.includes(a.pass));
      const erased = decided(it, "ITEM_ERASED");
      let state = decided(it, "UNVERIFIED") ? "erase failed (not verified): decide again" : "undecided";
      if (d && d.review.decision === "DISMISS") state = "dismissed: " + d.review.reason;
      else if (erased) state = "erased (" + erased.stores[0].deleted + " deleted, " + erased.stores[0].remaining + " remaining)";
      else if (d) state = "erase decided, in progress";
      const cells = [el("td", {}, it.store), el("td", {}, it.kind), el("td", {}, el("code", {}, it.item)), el("td", { class: "review-state" }, state)];
      if (d) return el("tr", { "data-item": it.item, "data-decided": d.review.decision }, cells, el("td", {}));
      const reason = el("input", { name: "reason", placeholder: "reason (required to dismiss)", autocomplete: "off", maxlength: 500 });
      const decide = decision => async () => {
        try {
          const res = await api("POST", "/v1/erasures/" + encodeURIComponent(rc.request_id) + "/review", { store: it.store, item: it.item, decision, reason: reason.value });
          toast(decision === "ERASE" ? "erasure of the copy requested" : "dismissed");
          for (let i = 0; i < 120 && !settled(await load(), res.review); i++) await new Promise(r => setTimeout(r, 500));
        } catch (e) { toast("decision refused: " + e.message, true); }
      };
      return el("tr", { "data-item": it.item, "data-decided": "" }, cells, el("td", {}, reason,
        el("button", { class: "danger", "data-decide": "ERASE", onclick: decide("ERASE") }, "Erase copy"),
        el("button", { "data-decide": "DISMISS", onclick: decide("DISMISS") }, "Dismiss: not the subject's")));
    };
    put(box, el("h3", {}, "For review"),
      el("p", { class: "small" }, "Probable untagged copies of the subject's data, found by semantic read-back. Erase a copy, or dismiss it with the reason it is not the subject's; the decision is recorded in the tenant's receipt chain."),
      el("table", { id: "review-items" }, el("tr", {}, ["Store", "Kind", "Item", "Decision", ""].map(h => el("th", {}, h))), items.map(row)));
    return addenda;
  };
  load().catch(e => box.append(el("p", { class: "bad" }, e.message)));
  return box;
}

async function deadLettersPage() {
  const table = el("table", { id: "dead-letters" });
  put(main(), el("h2", {}, "Dead letters"), table);
  const list = (await api("GET", "/v1/dead-letters")).dead_letters;
  put(table, el("tr", {}, ["Topic", "Partition/offset", "Source", "Request", "Tenant", "Reason", "At", ""].map(h => el("th", {}, h))),
    list.map(d => el("tr", {}, el("td", {}, d.topic), el("td", {}, d.entry.partition + "/" + d.entry.offset), el("td", {}, d.entry.source_topic),
      el("td", {}, d.entry.event ? d.entry.event.request_id || "" : ""), el("td", {}, d.entry.event ? d.entry.event.tenant_id : ""),
      el("td", { class: "small" }, d.entry.reason + (d.entry.principal ? " · producer " + d.entry.principal : "")),
      el("td", {}, new Date(d.entry.at).toLocaleString()),
      el("td", {}, d.entry.redacted
        ? el("span", { class: "small", title: "its identifiers were replaced by placeholders: the producer must submit the request again" }, "redacted, not replayable")
        : el("button", { onclick: async () => {
          try { const r = await api("POST", "/v1/dead-letters/replay", { topic: d.topic, partition: d.entry.partition, offset: d.entry.offset }); toast("replayed " + r.replayed); }
          catch (e) { toast("replay refused: " + e.message, true); }
        } }, "Replay")))));
  if (!list.length) table.append(el("tr", {}, el("td", { colspan: 8 }, "No dead letter.")));
}

async function inventoryPage() {
  const inv = await api("GET", "/v1/inventory");
  const uncovered = el("section", { id: "uncovered" }, el("h3", {}, "Uncovered locations (discovery)"));
  put(main(), el("h2", {}, "Inventory " + inv.version),
    el("table", { id: "inventory" }, el("tr", {}, el("th", {}, "Store"), el("th", {}, "Kind"), el("th", {}, "Physical erasure")),
      inv.stores.map(s => el("tr", {}, el("td", {}, s.store || s.name), el("td", {}, s.kind), el("td", { class: "small" }, s.physical || "")))),
    el("p", {}, "Kinds: " + inv.kinds.join(", ")), uncovered);
  try {
    const d = await api("GET", "/v1/discovery/uncovered");
    const ran = d.reports.filter(r => r.run_at);
    uncovered.append(
      el("p", { class: "small" }, ran.length ? "Last run: " + ran.map(r => r.kind + " " + new Date(r.run_at).toLocaleString()).join(", ") : "Discovery has not run yet."),
      d.uncovered.length
        ? el("table", { id: "uncovered-locations" }, el("tr", {}, el("th", {}, "Kind"), el("th", {}, "Location"), el("th", {}, "Items sampled"), el("th", {}, "Why")),
          d.uncovered.map(u => el("tr", {}, el("td", {}, u.kind), el("td", {}, u.location), el("td", {}, String(u.count)), el("td", { class: "small" }, u.reason))))
        : el("p", {}, "Discovery found no uncovered location."));
  } catch (e) {
    uncovered.append(el("p", { class: "muted" }, "Discovery reports are not available here: " + e.message));
  }
}

async function holdsPage() {
  const table = el("table", { id: "holds" });
  const f = el("form", { id: "hold-form", class: "card", autocomplete: "off" },
    el("h3", {}, "Place a legal hold"),
    el("label", {}, "Tenant ", tenantSelect("tenant_id", false)),
    el("label", {}, "Subject id (empty: every subject) ", el("input", { name: "subject_id", autocomplete: "off" })),
    el("label", {}, "Store (empty: every store) ", el("input", { name: "store" })),
    el("label", {}, "Legal basis ", el("input", { name: "legal_basis", required: true })),
    el("label", {}, "Reason ", el("input", { name: "reason" })),
    el("button", { type: "submit" }, "Hold"));
  put(main(), el("h2", {}, "Legal holds"), table, f);
  const load = async () => {
    const q = me.tenants.length === 1 && me.tenants[0] !== "*" ? "?tenant=" + encodeURIComponent(me.tenants[0]) : "";
    const holds = (await api("GET", "/v1/holds" + q)).holds;
    put(table, el("tr", {}, ["Hold", "Tenant", "Subject (pseudonym)", "Store", "Legal basis", "Reason", "By", "State", ""].map(h => el("th", {}, h))),
      holds.map(h => el("tr", { "data-hold": h.hold_id }, el("td", {}, h.hold_id), el("td", {}, h.tenant_id), el("td", { class: "small" }, h.subject_hash ? h.subject_hash.slice(0, 16) + "…" : "every subject"),
        el("td", {}, h.store || "every store"), el("td", {}, h.legal_basis), el("td", {}, h.reason), el("td", {}, h.created_by),
        el("td", {}, h.released_at ? "released by " + h.released_by : "active"),
        el("td", {}, h.released_at ? "" : el("button", { onclick: async () => {
          try { const r = await api("POST", "/v1/holds/" + encodeURIComponent(h.hold_id) + "/release"); toast("released; re-driven " + r.redriven.length); await load(); }
          catch (e) { toast("release refused: " + e.message, true); }
        } }, "Release")))));
  };
  f.addEventListener("submit", async ev => {
    ev.preventDefault();
    const body = { tenant_id: f.tenant_id.value, subject_id: f.subject_id.value, store: f.store.value, legal_basis: f.legal_basis.value, reason: f.reason.value };
    f.subject_id.value = "";
    try { await api("POST", "/v1/holds", body); toast("hold placed"); f.reset(); await load(); } catch (e) { toast("hold refused: " + e.message, true); }
  });
  await load();
}

// ---- routing ----

function startPoll(fn) { stopPoll(); poll = setInterval(fn, 1000); }
function stopPoll() { if (poll) clearInterval(poll); poll = null; }

async function route() {
  stopPoll();
  const [, page, arg] = (location.hash || "#/requests").split("/");
  if (!sessionStorage.getItem(TOKEN) || page === "login") return loginPage();
  try {
    if (!me) await whoami();
    for (const a of document.querySelectorAll("[data-nav]")) a.classList.toggle("active", a.dataset.nav === page);
    switch (page) {
      case "request": return await requestPage(decodeURIComponent(arg));
      case "submit": return submitPage();
      case "dead-letters": return await deadLettersPage();
      case "inventory": return await inventoryPage();
      case "holds": return await holdsPage();
      default: return await requestsPage();
    }
  } catch (e) {
    put(main(), el("p", { class: "bad" }, e.message));
  }
}

window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", () => {
  $("#logout").addEventListener("click", logout);
  route();
});
