// The dashboard's one script: it follows the API's event streams and keeps
// the page current without reloading. Every value from the server is put
// into the page as text (textContent), never as markup; the parts of a task
// page that are rendered by the server are fetched again as a whole page and
// swapped in (elements marked data-live).
"use strict";

(function () {
  const body = document.body;
  if (body.dataset.page === "list") listPage();
  if (body.dataset.page === "task") taskPage();

  // progress mirrors store.Task.Progress: committed units of the current
  // pass, and units known so far (a step not yet planned counts as one).
  function progress(t) {
    let done = 0, total = 0;
    for (const s of t.steps || []) {
      done += s.done;
      total += (s.planned || s.units > 0) ? s.units : 1;
    }
    return [done, total];
  }

  function currentStep(t) {
    const steps = t.steps || [];
    if (t.status === "succeeded" || t.cursor < 0 || t.cursor >= steps.length) return "";
    return steps[t.cursor].name;
  }

  // when mirrors the server's time format: UTC, to the second.
  function when(iso) {
    if (!iso || iso.startsWith("0001-")) return "—";
    return new Date(iso).toISOString().slice(0, 19).replace("T", " ") + "Z";
  }

  // span mirrors the server's durations: "850ms", "42s", "3m05s",
  // "2h04m", "3d04h".
  function span(ms) {
    const pad = (n) => String(n).padStart(2, "0");
    ms = Math.max(0, ms);
    if (ms < 1000) return Math.floor(ms) + "ms";
    if (ms < 60e3) return Math.floor(ms / 1000) + "s";
    if (ms < 3600e3) { const s = Math.round(ms / 1000); return Math.floor(s / 60) + "m" + pad(s % 60) + "s"; }
    if (ms < 48 * 3600e3) { const m = Math.round(ms / 60e3); return Math.floor(m / 60) + "h" + pad(m % 60) + "m"; }
    const h = Math.round(ms / 3600e3);
    return Math.floor(h / 24) + "d" + pad(h % 24) + "h";
  }

  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v; else e.setAttribute(k, v);
    }
    for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
    return e;
  }

  // The task list shows the page the query asks for (filters, order,
  // page): each message of the list stream, which says that some task
  // changed, fetches that page again and swaps in its list.
  function listPage() {
    const es = new EventSource("/v1/tasks?follow=1");
    es.addEventListener("tasks", () => refreshSoon());
    es.addEventListener("error", (m) => {
      if (m.data) es.close(); // the server said why; a dropped connection is retried
    });
  }

  function taskPage() {
    const id = body.dataset.task;
    if (body.dataset.terminal === "true") return;
    const live = document.getElementById("live");
    const url = "/v1/tasks/" + encodeURIComponent(id) + "/events?follow=1&from=" + body.dataset.nextEvent;
    const es = new EventSource(url);
    es.addEventListener("open", () => { live.hidden = false; });
    es.addEventListener("event", (m) => addEvent(JSON.parse(m.data)));
    es.addEventListener("task", (m) => { showTask(JSON.parse(m.data)); refreshSoon(); });
    es.addEventListener("end", (m) => {
      es.close();
      live.hidden = true;
      showTask(JSON.parse(m.data));
      body.dataset.terminal = "true";
      refreshSoon();
    });
    es.addEventListener("error", (m) => {
      if (m.data) { es.close(); live.hidden = true; } // the server ended it with an error
    });
  }

  const maxEvents = 500;

  // addEvent shows a new event as the page's filter does: nothing on a
  // page of older events, and routine events only when every event is
  // asked for (the server lists the routine types in data-routine).
  function addEvent(ev) {
    const tbody = document.getElementById("events");
    if (tbody.dataset.follow !== "true") return;
    const routine = new Set((tbody.dataset.routine || "").split(" "));
    if (tbody.dataset.all !== "true" && routine.has(ev.type)) return;
    for (const none of tbody.querySelectorAll("tr.none")) none.remove();
    const msg = (ev.message || "") + (ev.kind ? " [" + ev.kind + "]" : "");
    const row = el("tr", { class: "new", "data-seq": ev.seq },
      el("td", {}, ev.seq), el("td", { class: "nowrap" }, when(ev.time)),
      el("td", {}, el("span", { class: "ev ev-" + ev.type }, ev.type)),
      el("td", {}, ev.step || ""), el("td", {}, ev.item == null ? "" : ev.item), el("td", {}, msg));
    tbody.prepend(row);
    while (tbody.rows.length > maxEvents) tbody.lastElementChild.remove();
  }

  function text(id, s) {
    const e = document.getElementById(id);
    if (e) e.textContent = s;
  }

  function showTask(t) {
    const [done, total] = progress(t);
    const status = document.getElementById("status");
    status.textContent = t.shown_status;
    status.className = "status s-" + t.shown_status;
    const bar = document.getElementById("progress");
    bar.max = total;
    bar.value = done;
    text("progress-text", done + " / " + total);
    text("current", currentStep(t) || "—");
    text("finished", when(t.finished_at));
    if (t.started_at && !t.started_at.startsWith("0001-")) {
      const end = t.finished_at && !t.finished_at.startsWith("0001-") ? new Date(t.finished_at) : new Date();
      text("started", when(t.started_at));
      text("duration", span(end - new Date(t.started_at)));
    }
    text("attempts", t.attempts + " (" + t.failures + " failed)");
    const upd = document.getElementById("updated");
    upd.dateTime = t.updated_at;
    upd.textContent = when(t.updated_at);
    const reason = document.getElementById("reason");
    reason.textContent = t.reason || "";
    reason.hidden = !t.reason;
    const drift = document.getElementById("drift");
    const d = t.drift;
    drift.textContent = d ? "environment drift: fact " + d.name + " changed from " + d.old + " to " + d.new + " (on_drift " + d.action + ")" : "";
    drift.hidden = !d;
    (t.steps || []).forEach((s, i) => {
      const row = document.getElementById("step-" + i);
      if (!row) return;
      row.querySelector(".units").textContent = (s.planned || s.units > 0) ? s.units : "—";
      row.querySelector(".done").textContent = s.done;
      row.querySelector(".failed").textContent = s.failed || 0;
      row.querySelector(".leased").textContent = s.leased;
      row.querySelector(".pass").textContent = s.pass;
      row.classList.toggle("cursor", i === t.cursor);
    });
  }

  // refreshSoon fetches the page again, with its query, and swaps in its
  // data-live parts (on a task's page: the failure, approvals, budgets,
  // effects, steps with their units, the timeline, counters, notes,
  // artifacts, outputs, the buttons; on the list: the tasks and the
  // approvals waiting for a person): at most one fetch at a time, and one
  // a second at most.
  let busy = false, again = false, last = 0;
  function refreshSoon() {
    if (busy) { again = true; return; }
    busy = true;
    setTimeout(refresh, Math.max(0, last + 1000 - Date.now()));
  }

  async function refresh() {
    last = Date.now();
    try {
      const resp = await fetch(location.pathname + location.search, { credentials: "same-origin", redirect: "manual", cache: "no-store" });
      if (resp.ok) swap(new DOMParser().parseFromString(await resp.text(), "text/html"));
    } catch (e) {
      // the next task message tries again
    } finally {
      busy = false;
      if (again) { again = false; refreshSoon(); }
    }
  }

  function swap(doc) {
    const open = new Set([...document.querySelectorAll("details[id][open]")].map((d) => d.id));
    const focused = document.activeElement;
    for (const fresh of doc.querySelectorAll("[data-live][id]")) {
      const cur = document.getElementById(fresh.id);
      if (!cur) continue;
      if (focused && cur.contains(focused) && focused.tagName === "INPUT") continue; // someone is typing a note
      // An unchanged part stays as it is: replacing it anyway would pull
      // a button out from under a click that is on its way.
      if (cur.isEqualNode(fresh)) continue;
      cur.replaceWith(document.adoptNode(fresh));
    }
    for (const id of open) {
      const d = document.getElementById(id);
      if (d) d.open = true;
    }
  }
})();
