// agentmesh console: the run page's live events (EventSource on the
// runs API's stream), a session's turns grouped from them, and its cancel
// button (a same-origin POST); the runs list's live rows (EventSource on
// /console/runs/live). Every value from the mesh is written with
// textContent, never as markup.
"use strict";

(function () {
  var terminal = { succeeded: true, failed: true, cancelled: true, timed_out: true, rejected: true };

  function text(id, s) {
    var el = document.getElementById(id);
    if (el) { el.textContent = s; }
    return el;
  }

  function setState(state) {
    var el = text("state", state);
    if (el) { el.className = "state " + state; }
  }

  function line(events, s) {
    var div = document.createElement("div");
    div.className = "event";
    div.textContent = s;
    events.appendChild(div);
    while (events.childNodes.length > 2000) { events.removeChild(events.firstChild); }
  }

  function el(tag, cls, s) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (s !== undefined) { e.textContent = s; }
    return e;
  }

  // turns groups a session's chunks by turn (contract v3): turn 1 answers
  // the run's prompt, an input chunk opens the next turn with its user
  // prompt, a turn_end chunk ends the current one. The section shows
  // once the run proves a session (its first input or turn_end chunk).
  function turns() {
    var box = document.getElementById("turns");
    var section = document.getElementById("session");
    if (!box || !section) { return function () {}; }
    var cur = null;
    var n = 0;
    function open(num, prompt) {
      n = num || n + 1;
      cur = el("section", "turn");
      cur.dataset.turn = String(n);
      cur.appendChild(el("h3", "", "Turn " + n));
      var p = el("div", "prompt");
      p.appendChild(el("b", "", "user: "));
      p.appendChild(document.createTextNode(prompt === null ? "(the run's prompt: its record keeps it only with consent)" : prompt));
      cur.appendChild(p);
      cur.reply = el("pre", "reply");
      cur.appendChild(cur.reply);
      box.appendChild(cur);
    }
    return function (c) {
      var meta = c.metadata || {};
      if (c.type === "input") {
        section.hidden = false;
        open(meta.num_turns, c.content || "");
        return;
      }
      if (!cur) { open(1, box.dataset.prompt ? box.dataset.prompt : null); }
      if (c.type === "turn_end") {
        section.hidden = false;
        var end = "turn " + (meta.num_turns || n) + " ended" + (meta.stop_reason ? ": " + meta.stop_reason : "");
        if (meta.cost) { end += " · " + meta.cost + " USD"; }
        cur.appendChild(el("p", "turn-end note", end));
        return;
      }
      if (c.type === "text" && c.content) { cur.reply.textContent += c.content; }
      if (c.type === "tool_use") { cur.reply.appendChild(el("span", "tool", "[" + (c.tool_name || "tool") + "]\n")); }
    };
  }

  function follow(events) {
    var output = document.getElementById("output");
    var cancel = document.getElementById("cancel");
    var turn = turns();
    var es = new EventSource(events.dataset.url);
    es.addEventListener("open", function () { text("stream-state", "streaming"); });
    es.addEventListener("chunk", function (e) {
      var ev = JSON.parse(e.data);
      var c = ev.chunk || {};
      line(events, "#" + ev.seq + " chunk " + (c.type || "") + (c.tool_name ? " " + c.tool_name : ""));
      if (c.type === "text" && c.content) { output.textContent += c.content; }
      turn(c);
    });
    es.addEventListener("status", function (e) {
      var ev = JSON.parse(e.data);
      var st = ev.status || {};
      var what = "#" + ev.seq + " status " + st.state;
      if (st.error) { what += " · " + st.error["class"] + ": " + (st.error.message || ""); }
      line(events, what);
      setState(st.state);
      if (st.pin) { text("pin", st.pin.provider + "/" + st.pin.model + " · profile " + st.pin.profile_hash + " · registry " + st.pin.registry_version); }
      if (terminal[st.state]) {
        if (st.summary && st.summary.cost) { text("cost", st.summary.cost + " USD"); }
        if (st.error) { text("run-error", st.error["class"] + ": " + (st.error.message || "")); }
        es.close();
        if (cancel) { cancel.disabled = true; }
        text("stream-state", "ended: " + st.state);
      }
    });
    es.addEventListener("error", function (e) {
      if (e.data) {
        line(events, "error " + e.data);
        es.close();
        text("stream-state", "the stream failed");
        return;
      }
      if (es.readyState === EventSource.CLOSED) { text("stream-state", "disconnected"); } else { text("stream-state", "reconnecting…"); }
    });
  }

  function cancelButton(btn) {
    btn.addEventListener("click", function () {
      btn.disabled = true;
      text("cancel-result", "cancelling…");
      fetch(btn.dataset.url, { method: "POST", credentials: "same-origin", headers: { "Accept": "application/json" } })
        .then(function (r) { return r.json().then(function (body) { return { ok: r.ok, body: body }; }); })
        .then(function (res) {
          if (!res.ok) {
            text("cancel-result", "refused: " + ((res.body.error && res.body.error.message) || "error"));
            btn.disabled = false;
            return;
          }
          var b = res.body;
          text("cancel-result", b.cancelled ? "cancelled" : (b.ended ? "had already ended: " + b.state : String(b.state || "")));
          if (b.state) { setState(b.state); }
        })
        .catch(function (err) { text("cancel-result", "failed: " + err); btn.disabled = false; });
    });
  }

  // liveRuns follows the runs list's stream: a run the filters keep is
  // updated in place, or, on the first page, added in its place by
  // creation time; one that left the filters is removed.
  function liveRuns(state) {
    var table = document.getElementById("runs");
    var body = table && table.tBodies[0];
    if (!body) { return; }
    var first = state.dataset.first === "true";
    function find(key) {
      for (var i = 0; i < body.rows.length; i++) {
        if (body.rows[i].dataset.key === key) { return body.rows[i]; }
      }
      return null;
    }
    function stateCell(td, r) {
      td.className = "state " + r.state;
      td.dataset.error = r.error || "";
      td.textContent = r.state + (r.error ? " · " + r.error : "");
    }
    function newRow(r) {
      var tr = el("tr", "run");
      tr.dataset.key = r.key;
      tr.dataset.created = String(r.created_ms);
      tr.appendChild(el("td", "", r.created));
      tr.appendChild(el("td", "", r.tenant));
      var a = el("a", "", r.run_id);
      a.href = "/console/runs/" + encodeURIComponent(r.tenant) + "/" + encodeURIComponent(r.run_id);
      var td = el("td");
      td.appendChild(a);
      tr.appendChild(td);
      tr.appendChild(el("td"));
      tr.appendChild(el("td", "", r.profile));
      tr.appendChild(el("td", "", r.adapter));
      tr.appendChild(el("td", "", r.principal));
      tr.appendChild(el("td", "cost"));
      var labels = el("td");
      Object.keys(r.labels || {}).sort().forEach(function (k) {
        labels.appendChild(el("span", "label", k + "=" + r.labels[k]));
        labels.appendChild(document.createTextNode(" "));
      });
      tr.appendChild(labels);
      return tr;
    }
    var es = new EventSource(state.dataset.url);
    es.addEventListener("open", function () { state.textContent = first ? "live: new runs and their states show as they happen" : "live: these runs' states show as they change"; });
    es.addEventListener("run", function (e) {
      var r = JSON.parse(e.data);
      var tr = find(r.key);
      if (!r.match) {
        if (tr) { body.removeChild(tr); }
        return;
      }
      if (!tr) {
        if (!first) { return; }
        tr = newRow(r);
        var before = null;
        for (var i = 0; i < body.rows.length; i++) {
          var c = Number(body.rows[i].dataset.created);
          if (body.rows[i].dataset.key && c < r.created_ms) { before = body.rows[i]; break; }
        }
        body.insertBefore(tr, before);
        var none = document.getElementById("no-runs");
        if (none) { body.removeChild(none); }
      }
      tr.dataset.state = r.state;
      stateCell(tr.cells[3], r);
      tr.cells[7].textContent = r.cost || "";
    });
    es.addEventListener("reload", function () {
      es.close();
      state.textContent = "more runs changed than this page can follow: reload it";
    });
    es.addEventListener("error", function () {
      if (es.readyState === EventSource.CLOSED) { state.textContent = "live updates stopped: reload the page"; } else { state.textContent = "reconnecting…"; }
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var live = document.getElementById("live-state");
    if (live && live.dataset.url) { liveRuns(live); }
    var events = document.getElementById("events");
    if (events && events.dataset.url) { follow(events); }
    var btn = document.getElementById("cancel");
    if (btn && btn.dataset.url) { cancelButton(btn); }
  });
})();
