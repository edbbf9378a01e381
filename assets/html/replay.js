// The in-browser replay of tokenreel's HTML report (tokenreel/html_report.py builds the page).
//
// Each arm's panel streams its median run's events as their archived arrival times (ns from
// request send) pass on the replay clock. The clock is a whole number of milliseconds: the
// slider sets it exactly (a seek), and playback advances it with requestAnimationFrame and
// performance.now, scaled by the speed. An arm shows exactly the events with t <= clock.
// Answer text is untrusted: it only ever reaches the page through text nodes.
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
    tail: null, // {kind, node}: the text node the next piece of the same kind is appended to
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
    }
    seek(0);
  }

  function clearStream(panel) {
    panel.stream.replaceChildren();
    panel.shown = 0;
    panel.tail = null;
  }

  function appendEvents(panel, from, to) {
    const track = panel.track;
    for (let i = from; i < to; i++) {
      for (const kind of KINDS) {
        const text = track[kind] ? track[kind][i] : "";
        if (!text) continue;
        if (panel.tail && panel.tail.kind === kind) {
          panel.tail.node.appendData(text);
        } else {
          const span = document.createElement("span");
          span.className = `k-${kind}`;
          const node = document.createTextNode(text);
          span.append(node);
          panel.stream.append(span);
          panel.tail = { kind, node };
        }
      }
    }
    panel.shown = to;
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

  choosePrompt(0);
})();
