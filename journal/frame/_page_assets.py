"""The one style and the one script of every report page (see :mod:`journal.frame.htmlpage`).

The page's Content-Security-Policy allows exactly these two by their hashes.
The script reads the records from the page's JSON element and only ever sets
``textContent``, ``hidden`` and ``href="#..."`` of its own elements: no text
of a record is parsed as HTML. It does two things: a ``#id`` in the address
opens that record in the side panel (so every link to an entry is an
ordinary link), and the search box (where the page has one) hides the
items whose record does not hold every word typed.
"""

from __future__ import annotations

from typing import Final

__all__ = ["SCRIPT", "STYLE"]

STYLE: Final = """
:root { color-scheme: light; --ink: #1d232a; --muted: #5b6670; --line: #d8dde2; --panel: #f6f8fa; }
* { box-sizing: border-box; }
body { margin: 0; padding: 1rem 1.5rem 4rem; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink); }
h1 { font-size: 1.4rem; margin: 0 0 .25rem; }
h2 { font-size: 1.1rem; margin: 1.5rem 0 .5rem; }
h3 { font-size: .95rem; margin: 1rem 0 .25rem; color: var(--muted); }
.summary { color: var(--muted); margin: 0 0 1rem; }
.verdict { font-weight: 600; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 0 2rem; }
svg { width: 100%; height: auto; display: block; font: 10px system-ui, sans-serif; }
svg text { fill: var(--muted); }
.legend { display: flex; flex-wrap: wrap; gap: .25rem .9rem; color: var(--muted); margin: .25rem 0; }
.swatch { display: inline-block; width: .8em; height: .8em; margin-right: .3em; vertical-align: -.05em; border-radius: 2px; }
#search { width: min(36rem, 100%); padding: .4rem .6rem; font: inherit; border: 1px solid var(--line); border-radius: 4px; }
.timeline { list-style: none; padding: 0; margin: 0; }
.day { content-visibility: auto; contain-intrinsic-size: auto 10rem; }  /* a year of days: only those on screen are laid out */
.day > h3 { padding: .2rem 0; margin-top: .6rem; }
.entries { list-style: none; padding: 0 0 0 .5rem; margin: 0; border-left: 2px solid var(--line); }
.entry { padding: .2rem .5rem; }
.entry .open { font-weight: 600; text-decoration: none; color: var(--ink); }
.entry .voice { color: var(--ink); }
.entry .links { color: var(--muted); font-size: .9em; }
.entry .links a { margin-right: .4em; }
.tag { color: var(--muted); }
.superseded .voice { text-decoration: line-through; color: var(--muted); }
body:has(#detail:not([hidden])) { padding-right: calc(min(34rem, 50%) + 1.5rem); }
#detail { position: fixed; top: 0; right: 0; width: min(34rem, 50%); height: 100vh; overflow: auto; background: var(--panel);
  border-left: 1px solid var(--line); padding: 1rem 1.25rem; box-shadow: -4px 0 16px rgba(0,0,0,.08); }
#detail .close { float: right; }
#detail dt { font-weight: 600; color: var(--muted); margin-top: .5rem; }
#detail dd { margin: 0; overflow-wrap: anywhere; }
#detail pre { white-space: pre-wrap; font: inherit; margin: 0; }
.scroll { overflow-x: auto; }
table.grid { border-collapse: collapse; }
table.grid th, table.grid td { border: 1px solid var(--line); padding: 2px 3px; vertical-align: top; }
table.grid th { font-weight: 600; text-align: left; white-space: nowrap; }
table.grid thead th { font-weight: 400; color: var(--muted); font-size: .85em; }
.cell { display: inline-block; width: 12px; height: 12px; margin: 1px; border-radius: 2px; text-decoration: none; }
.k0 { background: #4e79a7; fill: #4e79a7; } .k1 { background: #f28e2b; fill: #f28e2b; } .k2 { background: #59a14f; fill: #59a14f; }
.k3 { background: #b07aa1; fill: #b07aa1; } .k4 { background: #9c755f; fill: #9c755f; } .k5 { background: #76b7b2; fill: #76b7b2; }
.kred { background: #e15759; fill: #e15759; }
.appended { background: #59a14f; } .duplicate { background: #a0cbe8; } .failed { background: #e15759; } .busy { background: #f1ce63; }
.missed { background: #8c564b; } .skipped { background: #d4d4d4; } .paused { background: #bab0ac; } .late { background: #f28e2b; } .absent { background: #fff; border: 1px dashed #e15759; }
"""

SCRIPT: Final = """
(function () {
  "use strict";
  var records = JSON.parse(document.getElementById("report-data").textContent);
  var own = function (key) { return Object.prototype.hasOwnProperty.call(records, key); };
  var panel = document.getElementById("detail");
  var heading = document.getElementById("detail-title");
  var list = document.getElementById("detail-fields");
  function show(key) {
    if (!own(key)) { panel.hidden = true; return; }
    var record = records[key];
    heading.textContent = record.title;
    list.replaceChildren();
    record.fields.forEach(function (field) {
      var term = document.createElement("dt");
      var value = document.createElement("dd");
      term.textContent = field[0];
      if (field[2] === "links") {
        field[1].forEach(function (link) {
          if (!own(link[0])) { return; }
          var anchor = document.createElement("a");
          anchor.href = "#" + link[0];
          anchor.textContent = link[1];
          value.appendChild(anchor);
          value.appendChild(document.createTextNode(" "));
        });
      } else if (field[2] === "long") {
        var block = document.createElement("pre");
        block.textContent = field[1];
        value.appendChild(block);
      } else {
        value.textContent = field[1];
      }
      list.appendChild(term);
      list.appendChild(value);
    });
    panel.hidden = false;
  }
  function route() {
    var key = location.hash.slice(1);
    try { key = decodeURIComponent(key); } catch (error) { key = ""; }
    show(key);
  }
  window.addEventListener("hashchange", route);
  var box = document.getElementById("search");
  if (box) {
    var items = Array.prototype.slice.call(document.querySelectorAll("[data-key]"));
    var groups = Array.prototype.slice.call(document.querySelectorAll("[data-group]"));
    var count = document.getElementById("shown");
    var haystacks = null;
    var haystack = function (item) {
      var key = item.getAttribute("data-key");
      if (!own(key)) { return ""; }
      var record = records[key];
      return (record.title + "\\n" + record.fields.filter(function (field) { return field[2] !== "links"; })
        .map(function (field) { return field[1]; }).join("\\n")).toLowerCase();
    };
    box.addEventListener("input", function () {
      if (haystacks === null) { haystacks = items.map(haystack); }
      var words = box.value.toLowerCase().split(/\\s+/).filter(Boolean);
      var shown = 0;
      items.forEach(function (item, index) {
        var hit = words.every(function (word) { return haystacks[index].indexOf(word) >= 0; });
        item.hidden = !hit;
        if (hit) { shown += 1; }
      });
      groups.forEach(function (group) { group.hidden = !group.querySelector("[data-key]:not([hidden])"); });
      if (count) { count.textContent = String(shown); }
    });
  }
  route();
  performance.mark("report-ready");  // what bench/bench_report.py reads as the page's time to interactive
  document.body.setAttribute("data-ready", "1");
})();
"""
