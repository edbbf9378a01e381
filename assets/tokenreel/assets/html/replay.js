// The in-browser replay of tokenreel's HTML report (tokenreel/html_report.py builds the page).
//
// Each arm's panel streams its median run's events as their archived arrival times (ns from
// request send) pass on the replay clock. The clock is a whole number of milliseconds: the
// slider sets it exactly (a seek), and playback advances it with requestAnimationFrame and
// performance.now, scaled by the speed. An arm shows exactly the events with t <= clock.
// Answer text is untrusted: it only ever reaches the page through text nodes.
//
// An answer is shown as rendered markdown (emphasis, code, headings, lists, pipe tables, fenced
// code), re-rendered from the text shown so far at every change, so a marker shows as text until
// its closing marker arrives. The rendering is lossless: every character of the text lands in one
// text node, in order, and the markers (**, ```, "# ", pipes, newlines) sit in hidden .md spans,
// so a panel's textContent is exactly the archived text up to the clock.
"use strict";
(() => {
  if (!document.getElementById("scrub")) return; // a session with nothing to replay has no player
  const NS_PER_MS = 1e6;
  const KINDS = ["reasoning", "content", "tool"]; // per event, in the video's order
  const data = JSON.parse(document.getElementById("replay-data").textContent);
  const picker = document.getElementById("prompt");
  const playButton = document.getElementById("play");
  const scrub = document.getElementById("scrub");
  const clock = document.getElementById("clock");
  const summary = document.getElementById("prompt-summary");
  const messages = document.getElementById("prompt-messages");
  const speedButtons = Array.from(document.querySelectorAll("button[data-speed]"));
  const panels = Array.from(document.querySelectorAll(".arm-panel")).map((el) => ({
    el,
    arm: el.dataset.arm,
    run: el.querySelector(".run"),
    rate: el.querySelector(".rate"),
    count: el.querySelector(".count"),
    ttft: el.querySelector(".ttft"),
    elapsed: el.querySelector(".elapsed"),
    fill: el.querySelector(".fill"),
    stream: el.querySelector(".stream"),
    track: null,
    cumulative: null,
    shown: 0, // events on screen
    segments: [], // [{kind, text}]: the shown text, one entry per run of events of one kind
  }));
  const state = { ms: 0, endMs: 0, speed: 1, playing: false, anchorMs: 0, anchorNow: 0 };

  // How many events arrived by cutoffNs (t is sorted).
  function visibleEvents(t, cutoffNs) {
    let lo = 0;
    let hi = t.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (t[mid] <= cutoffNs) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  function seconds(ms, digits) {
    return (ms / 1000).toFixed(digits) + " s";
  }

  function choosePrompt(index) {
    const prompt = data.prompts[index];
    state.endMs = prompt.end_ms;
    scrub.max = String(prompt.end_ms);
    summary.textContent = `Prompt ${prompt.id} · ${prompt.category}`;
    messages.replaceChildren();
    const parts = prompt.messages.length ? prompt.messages : [["prompt", prompt.prompt]];
    for (const [role, text] of parts) {
      const p = document.createElement("p");
      const who = document.createElement("span");
      who.className = "role";
      who.textContent = role;
      p.append(who, document.createTextNode(text));
      messages.append(p);
    }
    for (const panel of panels) {
      const track = prompt.tracks.find((t) => t.arm === panel.arm);
      panel.track = track;
      panel.cumulative = null;
      if (track && track.t) {
        const cumulative = new Float64Array(track.tokens.length + 1);
        track.tokens.forEach((n, i) => { cumulative[i + 1] = cumulative[i] + n; });
        panel.cumulative = cumulative;
        panel.run.textContent = `run ${track.run}`;
        panel.el.dataset.run = String(track.run);
      } else {
        panel.run.textContent = "";
        delete panel.el.dataset.run;
      }
      clearStream(panel);
      panel.stream.style.minHeight = "";
    }
    showPoster();
  }

  // Before play, each box shows its arm's final answer (the video's last frame) and keeps that
  // height while the race replays, so the page does not jump as the text grows.
  function showPoster() {
    seek(state.endMs);
    for (const panel of panels) panel.stream.style.minHeight = `${panel.stream.offsetHeight}px`;
  }

  function clearStream(panel) {
    panel.stream.replaceChildren();
    panel.shown = 0;
    panel.segments = [];
  }

  function appendEvents(panel, from, to) {
    const { track, segments } = panel;
    for (let i = from; i < to; i++) {
      for (const kind of KINDS) {
        const text = track[kind] ? track[kind][i] : "";
        if (!text) continue;
        const last = segments[segments.length - 1];
        if (last && last.kind === kind) last.text += text;
        else segments.push({ kind, text });
      }
    }
    panel.shown = to;
  }

  // The shown text drawn again: the answer as markdown, reasoning and tool calls as plain lines.
  function renderStream(panel) {
    const blocks = panel.segments.map(({ kind, text }) => {
      const block = document.createElement("div");
      block.className = `k-${kind}`;
      if (kind === "content") renderMarkdown(block, text);
      else for (const line of splitLines(text)) block.append(lineElement("div", line, false));
      return block;
    });
    panel.stream.replaceChildren(...blocks);
    const lines = panel.stream.querySelectorAll(".line");
    if (lines.length) lines[lines.length - 1].classList.add("tail"); // where the cursor blinks
  }

  // --- markdown, rendered losslessly (see the top of this file) --------------------------------

  const INLINE = /`([^`\n]+)`|\*\*([^\s*](?:[^\n]*?[^\s*])?)\*\*|\*([^\s*](?:[^*\n]*?[^\s*])?)\*/g;
  const FENCE = /^ {0,3}(`{3,}|~{3,})[ \t]*([^\s`]*)[^\n`]*\n?$/;
  const HEADING = /^(#{1,6})[ \t]+/;
  const ITEM = /^([ \t]*)([-*+]|\d{1,9}[.)])([ \t]+)/;
  const TABLE_ROW = /^[ \t]*\|/;
  const TABLE_RULE = /^[ \t]*\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*\n?$/;

  function splitLines(text) {
    return text.match(/[^\n]*\n?/g).filter((line) => line !== "");
  }

  function hidden(text) {
    const span = document.createElement("span");
    span.className = "md";
    span.textContent = text;
    return span;
  }

  // Columns of leading whitespace (a tab as 4): the line's hanging indent.
  function indentOf(text) {
    const lead = text.match(/^[ \t]*/)[0];
    return lead.length + 3 * (lead.split("\t").length - 1);
  }

  // **bold**, *italic* and `code` within one line, only once closed.
  function inline(parent, text) {
    let last = 0;
    for (const m of text.matchAll(INLINE)) {
      if (m.index > last) parent.append(text.slice(last, m.index));
      const [tag, marker, inner] =
        m[1] !== undefined ? ["code", "`", m[1]] : m[2] !== undefined ? ["strong", "**", m[2]] : ["em", "*", m[3]];
      const el = document.createElement(tag);
      el.append(hidden(marker));
      if (tag === "code") el.append(inner);
      else inline(el, inner);
      el.append(hidden(marker));
      parent.append(el);
      last = m.index + m[0].length;
    }
    if (last < text.length) parent.append(text.slice(last));
  }

  // One source line as a block whose wrapped rows hang under its first character.
  function lineElement(tag, line, markdown, prefix = "", indent = null) {
    const body = line.endsWith("\n") ? line.slice(0, -1) : line;
    const el = document.createElement(tag);
    el.className = body.trim() === "" && !prefix ? "line blank" : "line";
    el.style.setProperty("--indent", String(indent === null ? indentOf(body) : indent));
    const rest = body.slice(prefix.length);
    if (markdown) inline(el, rest);
    else if (rest) el.append(rest);
    if (body !== line) el.append(hidden("\n"));
    return el;
  }

  function renderMarkdown(parent, text) {
    const lines = splitLines(text);
    let list = null;
    for (let i = 0; i < lines.length; ) {
      const line = lines[i];
      const fence = line.match(FENCE);
      const item = line.match(ITEM);
      if (fence) {
        i = codeBlock(parent, lines, i, fence[1]);
      } else if (TABLE_ROW.test(line) && i + 1 < lines.length && TABLE_RULE.test(lines[i + 1])) {
        i = pipeTable(parent, lines, i);
      } else if (item) {
        list = listItem(parent, list, line, item);
        i += 1;
        continue;
      } else {
        const heading = line.match(HEADING);
        parent.append(heading ? headingElement(line, heading[0]) : lineElement("div", line, true));
        i += 1;
      }
      list = null;
    }
  }

  function headingElement(line, marker) {
    const level = marker.trim().length;
    const el = lineElement(`h${Math.min(level + 2, 6)}`, line, true, marker);
    el.classList.add("md-h");
    el.prepend(hidden(marker));
    return el;
  }

  // A bullet's marker is hidden behind a drawn bullet; a number stays as written.
  function listItem(parent, list, line, [prefix, lead, marker, gap]) {
    const ordered = /\d/.test(marker);
    if (!list || list.ordered !== ordered) {
      list = { ordered, el: document.createElement(ordered ? "ol" : "ul") };
      list.el.className = "md-list";
      parent.append(list.el);
    }
    const li = lineElement("li", line, true, prefix, indentOf(lead) + marker.length + gap.length);
    const mark = ordered ? [marker] : [Object.assign(document.createElement("span"), { className: "bullet" }), hidden(marker)];
    li.prepend(lead, ...mark, gap);
    list.el.append(li);
    return list;
  }

  // A fenced block: code from its first line (the fence hidden), until the closing fence.
  function codeBlock(parent, lines, start, marker) {
    const pre = document.createElement("pre");
    const code = document.createElement("code");
    pre.className = "md-code";
    pre.append(hidden(lines[start]), code);
    parent.append(pre);
    for (let i = start + 1; i < lines.length; i++) {
      const close = lines[i].match(FENCE);
      if (close && !close[2] && close[1].startsWith(marker)) {
        pre.append(hidden(lines[i]));
        return i + 1;
      }
      code.append(highlighted(lineElement("span", lines[i], false)));
    }
    return lines.length;
  }

  // Code colours as the video's theme has them (keywords, strings, numbers, comments), from one
  // small tokenizer for the common languages: the line's text is kept exactly, split into spans.
  const KEYWORDS = new Set(("and as assert async await break case catch class const continue def del elif else enum except " +
    "export extends false False finally fn for from func function go if impl import in interface is lambda let loop match " +
    "mod mut new nil None not null or package pass pub raise return self static struct switch this throw true True try " +
    "type typeof use var void while with yield").split(" "));
  const TOKEN = /(#.*|\/\/.*)|("(?:[^"\\]|\\.)*"?|'(?:[^'\\]|\\.)*'?)|(\b\d[\d_]*(?:\.\d+)?\b)|([A-Za-z_][A-Za-z0-9_]*)/g;
  function highlighted(el) {
    for (const node of [...el.childNodes]) {
      if (node.nodeType !== Node.TEXT_NODE) continue;
      const text = node.textContent, parts = [];
      let last = 0;
      for (const m of text.matchAll(TOKEN)) {
        const kind = m[1] ? "comment" : m[2] ? "string" : m[3] ? "number" : KEYWORDS.has(m[4]) ? "keyword" : null;
        if (!kind) continue;
        if (m.index > last) parts.push(text.slice(last, m.index));
        parts.push(Object.assign(document.createElement("span"), { className: `syn-${kind}`, textContent: m[0] }));
        last = m.index + m[0].length;
      }
      if (parts.length) node.replaceWith(...parts, text.slice(last));
    }
    return el;
  }

  // A pipe table (header, rule, rows); the rule row is kept, hidden.
  function pipeTable(parent, lines, start) {
    const wrap = document.createElement("div");
    const table = document.createElement("table");
    wrap.className = "md-table";
    wrap.append(table);
    parent.append(wrap);
    let i = start;
    for (; i < lines.length && TABLE_ROW.test(lines[i]); i++) {
      const row = document.createElement("tr");
      if (i === start + 1) {
        row.className = "md";
        row.append(Object.assign(document.createElement("td"), { textContent: lines[i] }));
      } else {
        tableCells(row, lines[i], i === start ? "th" : "td");
      }
      table.append(row);
    }
    return i;
  }

  function tableCells(row, line, tag) {
    const newline = line.endsWith("\n") ? "\n" : "";
    const parts = line.slice(0, line.length - newline.length).split("|");
    const closed = parts.length > 2 && parts[parts.length - 1].trim() === "";
    const cells = parts.slice(1, closed ? -1 : undefined);
    cells.forEach((text, k) => {
      const cell = document.createElement(tag);
      cell.append(hidden((k === 0 ? parts[0] : "") + "|"));
      inline(cell, text);
      if (k === cells.length - 1) cell.append(hidden((closed ? "|" + parts[parts.length - 1] : "") + newline));
      row.append(cell);
    });
  }

  // Decode tok/s over the visible events after the first token, as tokenreel.metrics defines it.
  function liveDecode(panel, visible) {
    const { track, cumulative } = panel;
    if (visible <= track.first + 1) return null;
    const span = track.t[visible - 1] - track.t[track.first];
    const after = cumulative[visible] - cumulative[track.first + 1];
    return span > 0 && after > 0 ? (after * 1e9) / span : null;
  }

  function drawPanel(panel, cutoffNs) {
    const track = panel.track;
    if (!track || !track.t) {
      panel.el.dataset.tokens = "0";
      panel.el.classList.add("missing");
      panel.rate.textContent = "—";
      panel.count.textContent = `no run to replay: ${track ? track.missing : "not in this prompt"}`;
      panel.ttft.textContent = "";
      panel.elapsed.textContent = "";
      panel.fill.style.width = "0%";
      return;
    }
    panel.el.classList.remove("missing");
    const visible = visibleEvents(track.t, cutoffNs);
    if (visible < panel.shown) clearStream(panel);
    if (visible > panel.shown) {
      appendEvents(panel, panel.shown, visible);
      renderStream(panel);
      panel.stream.scrollTop = panel.stream.scrollHeight; // follow the newest text, as the video does
    }
    panel.stream.classList.toggle("scrolled", panel.stream.scrollTop > 0); // fade the cut-off top line
    const tokens = panel.cumulative[visible];
    const about = track.estimated ? "≈" : "";
    const started = track.first !== null && visible > track.first;
    const done = track.last !== null && visible > track.last;
    panel.el.dataset.tokens = String(tokens);
    panel.el.classList.toggle("done", done);
    panel.el.classList.toggle("waiting", !started);
    panel.count.textContent = `${about}${tokens} / ${track.total} tokens`;
    panel.ttft.textContent = started ? `TTFT ${track.ttft}` : "waiting for the first token";
    if (done) {
      panel.rate.textContent = about + track.decode;
      panel.elapsed.textContent = `${ordinal(track.place)} · done ${track.done}`;
    } else {
      const rate = liveDecode(panel, visible);
      panel.rate.textContent = rate === null ? "—" : about + rate.toFixed(1);
      panel.elapsed.textContent = `elapsed ${seconds(Math.min(state.ms, state.endMs), 2)}`;
    }
    panel.fill.style.width = `${Math.min(100, (100 * tokens) / Math.max(track.total, 1))}%`;
  }

  function ordinal(place) {
    const names = { 1: "1st", 2: "2nd", 3: "3rd" };
    return names[place] || `${place}th`;
  }

  function draw() {
    const cutoffNs = state.ms * NS_PER_MS;
    for (const panel of panels) drawPanel(panel, cutoffNs);
    scrub.value = String(state.ms);
    clock.dataset.ms = String(state.ms);
    clock.textContent = `${seconds(state.ms, 3)} / ${seconds(state.endMs, 3)}`;
  }

  // The clock is always a whole number of ms within the replay: what is drawn is exactly t <= clock.
  function setClock(ms) {
    state.ms = Math.max(0, Math.min(state.endMs, Math.floor(ms)));
    draw();
  }

  // A jump (the slider, a new prompt): playback, if on, continues from here.
  function seek(ms) {
    setClock(ms);
    state.anchorMs = state.ms;
    state.anchorNow = performance.now();
  }

  function tick(now) {
    if (!state.playing) return;
    setClock(state.anchorMs + (now - state.anchorNow) * state.speed);
    if (state.ms >= state.endMs) setPlaying(false);
    else requestAnimationFrame(tick);
  }

  function setPlaying(playing) {
    state.playing = playing;
    playButton.textContent = playing ? "❚❚ Pause" : "▶ Play";
    playButton.setAttribute("aria-pressed", String(playing));
    if (playing) {
      if (state.ms >= state.endMs) seek(0);
      state.anchorMs = state.ms;
      state.anchorNow = performance.now();
      requestAnimationFrame(tick);
    }
  }

  picker.addEventListener("change", () => {
    setPlaying(false);
    choosePrompt(Number(picker.value));
  });
  playButton.addEventListener("click", () => setPlaying(!state.playing));
  scrub.addEventListener("input", () => seek(Number(scrub.value)));
  for (const button of speedButtons) {
    button.addEventListener("click", () => {
      state.speed = Number(button.dataset.speed);
      state.anchorMs = state.ms;
      state.anchorNow = performance.now();
      for (const other of speedButtons) other.setAttribute("aria-pressed", String(other === button));
    });
  }
  document.addEventListener("keydown", (event) => {
    if (event.key === " " && !(event.target instanceof HTMLSelectElement || event.target instanceof HTMLButtonElement)) {
      event.preventDefault();
      setPlaying(!state.playing);
    }
  });

  choosePrompt(Number(picker.value));  // the prompt nearest the suite's speed-up (the page marks it selected)
})();
