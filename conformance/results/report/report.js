(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var items = data.items, runs = data.runs, cases = data.cases || {};
  var panel = document.getElementById("details"), body = document.getElementById("details-body");
  var selected = null, legacyNull = false;

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") node.textContent = attrs[k]; else node.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { if (c) node.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return node;
  }
  function fmtSeconds(s) {
    if (s === null || s === undefined) return "";
    if (typeof s !== "number") return String(s);
    if (s < 1e-3) return (s * 1e6).toPrecision(3) + " µs";
    if (s < 1) return (s * 1e3).toPrecision(3) + " ms";
    return s.toPrecision(3) + " s";
  }
  var NON_FINITE = {"NaN": "NaN", "nan": "NaN", "inf": "inf", "Infinity": "inf", "-inf": "-inf", "-Infinity": "-inf"};
  function fmtNumber(v) {
    if (v === null || v === undefined) return null;
    if (typeof v === "number") return v.toPrecision(4);
    return NON_FINITE.hasOwnProperty(v) ? NON_FINITE[v] : String(v);
  }
  function httpUrl(u) {
    // the only addresses the report makes links of
    return typeof u === "string" && /^https?:\/\/\S+$/i.test(u.trim()) ? u.trim() : null;
  }
  function link(u, attrs) {
    // an http(s) address as a link; anything else (javascript:, data:, ...) as text
    var href = httpUrl(u);
    var a = href ? {href: href, target: "_blank", rel: "noopener noreferrer", text: href}
                 : {class: "not-a-link", title: "not an http(s) address: not a link", text: String(u)};
    Object.keys(attrs || {}).forEach(function (k) { a[k] = attrs[k]; });
    return el(href ? "a" : "code", a);
  }

  function compact(value) {
    // JSON with short arrays of numbers on one line: readable tensors
    var text = JSON.stringify(value, null, 1);
    if (text === undefined) return "";
    // non-finite numbers ("NaN", "inf", "-inf"; older files: "Infinity" or null) read as numbers
    text = text.replace(/"(NaN|nan|-?inf|-?Infinity)"/g, function (m, v) { return NON_FINITE[v]; });
    return text.replace(/\[\s*([-+\w.,\s"]*?)\s*\]/g, function (m, inner) {
      return "[" + inner.replace(/\s*\n\s*/g, " ").trim() + "]";
    });
  }
  function section(title, id) {
    var wrap = el("section", {class: "detail-section", id: id});
    wrap.appendChild(el("h4", {text: title}));
    body.appendChild(wrap);
    return wrap;
  }
  function valueCell(v) {
    if (v === null || v === undefined) return el("td", {}, [el("code", {text: "—"})]);
    // an older suite wrote NaN and ±inf inside values as null: "?" (see the note under the table)
    var text = compact(v).replace(/(^|[\[ ,])null(?=[\], \n]|$)/g, function (m, before) {
      legacyNull = true;
      return before + "?";
    });
    return el("td", {}, [el("code", {text: text})]);
  }

  function show(i) {
    var it = items[i];
    if (!it) return;
    if (selected) selected.classList.remove("selected");
    selected = document.querySelector('.chip[data-i="' + i + '"]');
    if (selected) selected.classList.add("selected");
    body.textContent = "";
    legacyNull = false;
    body.appendChild(el("h3", {text: (it.case || "(invalid spec)") + " [" + [it.backend, it.device, it.dtype].join("-") + "]"}));
    if (it.reason) {
      // why it did not run: what a reader of a mostly-unsupported column wants, so first
      section(it.outcome === "skipped" ? "Why it was skipped" : "Why it is unsupported", "details-reason")
        .appendChild(el("p", {id: "details-reason-text", text: it.reason}));
    }
    var dl = el("dl", {class: "facts"});
    function fact(name, value, cls) {
      if (value === null || value === undefined || value === "") return;
      dl.appendChild(el("dt", {text: name}));
      var dd = el("dd", cls ? {class: cls} : {});
      if (value instanceof Node) dd.appendChild(value); else dd.textContent = value;
      dl.appendChild(dd);
    }
    fact("outcome", el("span", {class: "badge o-" + it.outcome, id: "details-outcome", text: it.outcome}));
    fact("run", runs[it.run]);
    fact("spec", it.spec);
    fact("op", it.op);
    fact("backend / device / dtype", [it.backend, it.device, it.dtype].join(" / "));
    if (it.verdict) fact("verdict", el("span", {class: "verdict v-" + it.verdict, id: "details-verdict", text: it.verdict}));
    fact("max abs error", fmtNumber(it.max_abs_error));
    fact("max abs difference from stock torch", fmtNumber(it.torch_max_abs_error));
    fact("max rel error", fmtNumber(it.max_rel_error));
    fact("time (one run)", it.seconds !== null && it.seconds !== undefined ? fmtSeconds(it.seconds) : null);
    if (it.timing && it.timing.samples) {
      fact("benchmark median", fmtSeconds(it.timing.median) + " over " + it.timing.samples.length + " rounds (min " +
           fmtSeconds(it.timing.min) + ", stddev " + fmtSeconds(it.timing.stddev) + ")");
    }
    if (it.benchmark) fact("benchmark", "size " + (it.benchmark.size || []).join("×") + ", density " + it.benchmark.density +
                             ", steps " + it.benchmark.steps + (it.benchmark.nnz ? ", nnz " + it.benchmark.nnz : ""));
    if (it.compiles) fact("compiles (" + it.compiles.compiler + ")", JSON.stringify(it.compiles.counts), "compiles");
    fact("narrowed", it.narrowed ? String(it.narrowed) + " (the candidate does not support these options: the examples were drawn without them)" : null, "narrowed");
    fact("budget reached", it.budget_reached ? (it.budget_reached === true ? "the example budget ran out: the verdict stands on the examples that ran" : String(it.budget_reached)) : null, "budget-reached");
    if (it.crashed) fact("crashed", "the worker process died on this item");
    body.appendChild(dl);

    if (it.divergence) {
      var div = section(it.outcome === "xpass" ? "Known divergence (did not show up)" : "Known divergence", "details-divergence");
      div.appendChild(el("p", {id: "details-divergence-reason", text: it.divergence.reason}));
      var upstream = it.divergence.link || it.divergence.unsafe_link;
      if (upstream) div.appendChild(el("p", {}, ["upstream: ", link(upstream, {id: "details-divergence-link"})]));
    }
    if (it.looks_like) section("Likely cause", "details-looks-like").appendChild(el("p", {id: "details-looks-like-text",
        text: "looks like: " + String(it.looks_like.name || "?") + " \u2014 " + String(it.looks_like.explanation || "")}));
    if (it.improvement) section("Improvement over stock torch", "details-improvement").appendChild(el("p", {text: String(it.improvement)}));
    if (it.stale_divergence) section("Stale known divergence", "details-stale").appendChild(el("p", {text: String(it.stale_divergence)}));

    if (it.values && Object.keys(it.values).length) {
      var vt = el("table", {class: "values", id: "details-values"}, [el("tr", {}, [
        el("th", {text: "output"}), el("th", {text: "golden (expected)"}), el("th", {text: "stock torch"}),
        el("th", {text: it.backend === "candidate" ? "candidate" : it.backend})])]);
      var notReturned = [];
      Object.keys(it.values).forEach(function (name) {
        var v = it.values[name] || {};
        var got = v.not_returned ? el("td", {class: "not-returned", title: v.not_returned, text: "not returned"}) : valueCell(v.got);
        var row = el("tr", {}, [el("th", {text: name}), valueCell(v.expected), valueCell(v.torch), got]);
        if (v.not_returned) notReturned.push(name + ": " + v.not_returned);
        else if (JSON.stringify(v.got) !== JSON.stringify(v.expected)) row.classList.add("differs");
        vt.appendChild(row);
      });
      var valuesSection = section("Golden, stock torch and " + (it.backend === "candidate" ? "candidate" : it.backend) +
                                  ", side by side", "details-values-section");
      valuesSection.appendChild(vt);
      notReturned.forEach(function (note) {
        valuesSection.appendChild(el("p", {class: "sub not-returned-note", text: "not returned \u2014 " + note}));
      });
      if (legacyNull) {
        valuesSection.appendChild(el("p", {class: "sub", text: "? : a NaN or \u00b1inf (written as null by an older version of the suite)"}));
      }
    }

    var context = it.case_key ? cases[it.case_key] : null;
    if (context) {
      var inputs = section("Inputs", "details-inputs");
      inputs.appendChild(el("pre", {id: "details-inputs-text", text: compact(context.inputs)}));
      var golden = section("Golden values", "details-golden");
      var src = context.source || {};
      var srcText = [src.title, src.document ? "(" + src.document + ")" : null].filter(Boolean).join(" ");
      var address = src.url || src.link;
      golden.appendChild(el("p", {id: "details-source"}, ["source: ", el("b", {text: srcText || (address ? "" : src.key || "—")}),
                                                          address ? " " : "", address ? link(address, {id: "details-source-link"}) : null,
                                                          context.line ? " · " + it.spec + ":" + context.line : ""]));
      if (context.derivation) {
        golden.appendChild(el("p", {class: "sub", text: "derivation"}));
        golden.appendChild(el("pre", {id: "details-derivation", text: context.derivation}));
      }
      if (context.expected_error) {
        golden.appendChild(el("pre", {id: "details-golden-text", text: "raises " + context.expected_error.type +
                                      (context.expected_error.match ? " matching " + JSON.stringify(context.expected_error.match) : "")}));
      } else {
        golden.appendChild(el("pre", {id: "details-golden-text", text: compact(context.expected)}));
      }
    }

    if ((!it.values || !Object.keys(it.values).length) && it.pairs && it.pairs.length) {
      var table = el("table", {class: "pairs"}, [el("tr", {}, [el("th", {text: "expected"}), el("th", {text: "got"})])]);
      it.pairs.forEach(function (p) {
        table.appendChild(el("tr", {}, [el("td", {}, [el("code", {text: p.expected})]), el("td", {}, [el("code", {text: p.got})])]));
      });
      body.appendChild(el("h4", {text: "Expected vs got"}));
      body.appendChild(table);
    }
    if (it.message) {
      body.appendChild(el("h4", {text: "Message"}));
      body.appendChild(el("pre", {id: "details-message", text: it.message}));
    }
    body.appendChild(el("h4", {text: "Re-run it"}));
    var copy = el("button", {type: "button", class: "copy", text: "copy"});
    copy.addEventListener("click", function () {
      if (navigator.clipboard) navigator.clipboard.writeText(it.repro).catch(function () {});
    });
    body.appendChild(el("pre", {id: "details-repro", text: it.repro}));
    body.appendChild(copy);

    var others = items.filter(function (o) { return o.key === it.key && o !== it; });
    if (others.length) {
      body.appendChild(el("h4", {text: "In the other runs"}));
      var ul = el("ul", {});
      others.forEach(function (o) {
        var link = el("a", {href: "#", "data-i": String(items.indexOf(o)), class: "item-link", text: runs[o.run]});
        ul.appendChild(el("li", {}, [link, " ", el("span", {class: "badge o-" + o.outcome, text: o.outcome})]));
      });
      body.appendChild(ul);
    }
    openDrawer(true);
    panel.scrollTop = 0;
    // the chip stays in sight: above the drawer, below the sticky headers
    if (selected) selected.scrollIntoView({block: "nearest"});
  }
  function openDrawer(open) {
    panel.hidden = !open;
    document.documentElement.classList.toggle("drawer-open", open);
    document.body.classList.toggle("drawer-open", open);
    if (!open && selected) selected.classList.remove("selected");
  }
  window.conformanceShowItem = show;

  document.addEventListener("click", function (event) {
    var target = event.target.closest("[data-i]");
    if (target && !target.classList.contains("static")) {
      event.preventDefault();
      show(Number(target.getAttribute("data-i")));
    }
  });
  document.getElementById("details-close").addEventListener("click", function () { openDrawer(false); });
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape") openDrawer(false);
  });

  // filters
  var filter = document.getElementById("filter"), onlyDiffers = document.getElementById("only-differs"),
      hidePassing = document.getElementById("hide-passing"), runView = document.getElementById("run-view");
  // a summary count's rows: {backend, op ("" for every op), outcome, run}, or null
  var focus = null, focusBar = document.getElementById("focus-bar");
  function focusedChips(row) {
    // the row's chips of the focused backend, outcome and run
    if (focus.op && row.getAttribute("data-op") !== focus.op) return [];
    var found = [];
    row.querySelectorAll("td.cell").forEach(function (cell) {
      if (cell.getAttribute("data-backend") !== focus.backend) return;
      cell.querySelectorAll(".run-line").forEach(function (line) {
        if (line.getAttribute("data-run") !== focus.run) return;
        line.querySelectorAll("button.chip.o-" + focus.outcome).forEach(function (chip) { found.push(chip); });
      });
    });
    return found;
  }
  function applyFilters() {
    var text = filter ? (filter.value || "").toLowerCase() : "";
    document.querySelectorAll("button.chip.focus").forEach(function (chip) { chip.classList.remove("focus"); });
    var focusedRows = 0;
    document.querySelectorAll("tr.case-row").forEach(function (row) {
      var chips = focus ? focusedChips(row) : null;
      var hide = (text && row.getAttribute("data-search").toLowerCase().indexOf(text) < 0) ||
                 (onlyDiffers && onlyDiffers.checked && !row.classList.contains("differs")) ||
                 (hidePassing && hidePassing.checked && row.classList.contains("all-pass")) ||
                 (chips && !chips.length);
      row.classList.toggle("hidden", !!hide);
      if (chips && !hide) {
        focusedRows += 1;
        chips.forEach(function (chip) { chip.classList.add("focus"); });
      }
    });
    if (focusBar) {
      focusBar.hidden = !focus;
      if (focus) {
        document.getElementById("focus-text").textContent = "Showing the " + focusedRows + " row" + (focusedRows === 1 ? "" : "s") +
          " where " + focus.backend + " has " + focus.outcome + " items" + (focus.op ? " on " + focus.op : "") +
          (runs.length > 1 ? " in " + runs[Number(focus.run)] : "") +
          (focusedRows ? " (outlined)." : ": none drawn (a column where every item was skipped is named above, not drawn).");
      }
    }
    // a table whose rows are all hidden goes too, header and all
    document.querySelectorAll("table.matrix").forEach(function (table) {
      table.classList.toggle("hidden", !table.querySelector("tr.case-row:not(.hidden)"));
    });
    var view = runView ? runView.value : "all";
    document.querySelectorAll(".run-line").forEach(function (line) {
      line.classList.toggle("hidden", view !== "all" && line.getAttribute("data-run") !== view);
    });
  }
  document.querySelectorAll("a.count[data-outcome]").forEach(function (a) {
    a.addEventListener("click", function (event) {
      event.preventDefault();
      focus = {backend: a.getAttribute("data-backend"), op: a.getAttribute("data-op"),
               outcome: a.getAttribute("data-outcome"), run: a.getAttribute("data-run")};
      applyFilters();
      focusBar.scrollIntoView({block: "start"});  // the tables left follow it: the rows, outlined
    });
  });
  var focusClear = document.getElementById("focus-clear");
  if (focusClear) focusClear.addEventListener("click", function () { focus = null; applyFilters(); });
  [filter, onlyDiffers, hidePassing, runView].forEach(function (input) {
    if (input) input.addEventListener("input", applyFilters);
    if (input) input.addEventListener("change", applyFilters);
  });

  // diff view
  var base = document.getElementById("diff-base"), head = document.getElementById("diff-head");
  function showDiff() {
    var id = "diff-" + base.value + "-" + head.value, found = false;
    document.querySelectorAll("div.diff").forEach(function (d) { d.hidden = d.id !== id; found = found || d.id === id; });
    document.getElementById("diff-none").hidden = found;
  }
  if (base && head) { base.addEventListener("change", showDiff); head.addEventListener("change", showDiff); }
})();
