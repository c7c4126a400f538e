// agentmesh console: the run page's live events (EventSource on the
// runs API's stream) and its cancel button (a same-origin POST). Every
// value from the mesh is written with textContent, never as markup.
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

  function follow(events) {
    var output = document.getElementById("output");
    var cancel = document.getElementById("cancel");
    var es = new EventSource(events.dataset.url);
    es.addEventListener("open", function () { text("stream-state", "streaming"); });
    es.addEventListener("chunk", function (e) {
      var ev = JSON.parse(e.data);
      var c = ev.chunk || {};
      line(events, "#" + ev.seq + " chunk " + (c.type || "") + (c.tool_name ? " " + c.tool_name : ""));
      if (c.type === "text" && c.content) { output.textContent += c.content; }
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

  document.addEventListener("DOMContentLoaded", function () {
    var events = document.getElementById("events");
    if (events && events.dataset.url) { follow(events); }
    var btn = document.getElementById("cancel");
    if (btn && btn.dataset.url) { cancelButton(btn); }
  });
})();
