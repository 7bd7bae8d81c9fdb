// Live task events: WatchTaskEvents rings (server-sent events) and the page fetches what is
// new from ListTaskEvents, appending rows. No framework: the page works without this script.
"use strict";
(function () {
  const table = document.getElementById("events");
  if (!table || !window.EventSource) return;
  const state = document.getElementById("live-state");
  const body = table.querySelector("tbody");
  let after = Number(table.dataset.after || 0);
  let fetching = false, again = false;

  function cell(text, cls) {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    return td;
  }

  async function catchUp() {
    if (fetching) { again = true; return; }
    fetching = true;
    try {
      do {
        again = false;
        const resp = await fetch(`/tasks/${table.dataset.task}/events?after=${after}`, {credentials: "same-origin"});
        if (!resp.ok) return;
        for (const e of await resp.json()) {
          const tr = document.createElement("tr");
          tr.append(cell(e.seq, "num"), cell(e.kind), cell(e.at), cell(e.data, "mono"));
          body.append(tr);
          after = Math.max(after, e.seq);
        }
      } while (again);
    } finally {
      fetching = false;
    }
  }

  const source = new EventSource(`/tasks/${table.dataset.task}/events/stream`);
  // `ready` comes once the data plane listens (on every reconnection too): catching up then
  // misses nothing, since whatever commits later rings.
  source.onopen = () => { state.textContent = "(connecting)"; };
  source.addEventListener("ready", () => { state.textContent = "(live)"; catchUp(); });
  source.addEventListener("ring", catchUp);
  source.onerror = () => { state.textContent = "(reconnecting)"; };
})();
