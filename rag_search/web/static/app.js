// local-rag search page: results as you type, keyboard use, copy a citation. Plain JS, no build step; the page
// works without it (the search form is a GET form, every results page a bookmark).
(function () {
  "use strict";
  var DEBOUNCE_MS = 120;
  var form = document.getElementById("search");
  var box = document.getElementById("q");
  var results = document.getElementById("results");
  var timer = null, sequence = 0, typedAt = 0;

  function query() {
    var params = new URLSearchParams();
    new FormData(form).forEach(function (value, key) {
      if (value && !(key === "mode" && value === "hybrid")) params.append(key, value);
    });
    return params;
  }

  function drawn(mine, q, started) {  // after the browser has painted the new results
    requestAnimationFrame(function () {
      setTimeout(function () {
        if (mine !== sequence) return;
        document.body.dataset.drawnMs = (performance.now() - started).toFixed(1);
        document.body.dataset.drawnQuery = q;
      }, 0);
    });
  }

  function search() {
    var params = query(), mine = ++sequence, started = typedAt || performance.now(), q = params.get("q") || "";
    history.replaceState(null, "", params.toString() ? "/?" + params : "/");
    if (!q) { results.innerHTML = ""; drawn(mine, q, started); return; }
    fetch("/results?" + params, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (r) {
        if (r.status === 401) { location.href = "/login?next=" + encodeURIComponent("/?" + params); return null; }
        return r.text();
      })
      .then(function (html) {
        if (html === null || mine !== sequence) return;
        results.innerHTML = html;
        drawn(mine, q, started);
      })
      .catch(function () { if (mine === sequence) results.innerHTML = '<p class="error">The server did not answer. Is <code>local-rag serve</code> still running?</p>'; });
  }

  function soon(event) {
    typedAt = event && event.timeStamp ? event.timeStamp : performance.now();
    clearTimeout(timer);
    timer = setTimeout(search, DEBOUNCE_MS);
  }

  function hits() {  // the links shown (not those of folded-away weaker matches)
    return Array.prototype.slice.call(document.querySelectorAll(".hit .open")).filter(function (a) { return a.offsetParent !== null; });
  }

  function move(step) {
    var links = hits(), at = links.indexOf(document.activeElement);
    if (!links.length) return;
    var next = at < 0 ? (step > 0 ? 0 : -1) : at + step;
    if (next < 0) { box.focus(); select(null); return; }
    next = Math.min(next, links.length - 1);
    links[next].focus();
    select(links[next]);
  }

  function select(link) {
    document.querySelectorAll(".hit.sel").forEach(function (el) { el.classList.remove("sel"); });
    if (link) { link.closest(".hit").classList.add("sel"); link.scrollIntoView({ block: "nearest" }); }
  }

  function typing(el) {
    return el && (el.tagName === "INPUT" || el.tagName === "TEXTAREA" || el.tagName === "SELECT" || el.isContentEditable);
  }

  document.addEventListener("keydown", function (e) {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.key === "/" && !typing(document.activeElement)) {
      var target = box || null;
      if (!target) { location.href = "/"; return; }
      e.preventDefault(); target.focus(); target.select();
    } else if (box && (e.key === "ArrowDown" || e.key === "ArrowUp") && (document.activeElement === box || hits().indexOf(document.activeElement) >= 0)) {
      e.preventDefault(); move(e.key === "ArrowDown" ? 1 : -1);
    } else if (e.key === "Escape" && box) {
      box.focus(); select(null);
    }
  });

  if (form && box) {
    box.addEventListener("input", soon);
    form.addEventListener("change", function (e) { if (e.target !== box) soon(e); });
    form.addEventListener("submit", function (e) { e.preventDefault(); clearTimeout(timer); typedAt = performance.now(); search(); });
    var filters = document.getElementById("filters");
    if (filters && window.innerWidth < 640 && !filters.hasAttribute("data-set")) filters.removeAttribute("open");
  }

  var copy = document.getElementById("copy"), citation = document.getElementById("citation");
  if (copy && citation) {
    copy.addEventListener("click", function () {
      function done() { copy.textContent = "Copied"; setTimeout(function () { copy.textContent = "Copy citation"; }, 1500); }
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(citation.value).then(done, function () { citation.select(); });
      } else {  // plain http off loopback: no Clipboard API
        citation.select();
        try { if (document.execCommand("copy")) done(); } catch (err) { /* selected: Ctrl-C copies it */ }
      }
    });
  }
})();
