// Charts of the last minutes: each broker's TPS in and out, each consumer group's lag; refreshed at each sample.

import { api, h } from "../lib.js";
import { lineChart } from "../chart.js";

function seriesOf(entries, label, index) {
  return entries.map((e) => ({ label: label(e), points: e.points.map((p) => [p[0], p[index]]) }));
}

// The 8 groups furthest behind now: a chart of more lines reads as none.
function mostBehind(groups) {
  const now = (g) => (g.points.length ? g.points[g.points.length - 1][1] : 0);
  return [...groups].sort((a, b) => now(b) - now(a) || a.group.localeCompare(b.group)).slice(0, 8);
}

function draw(holder, m) {
  holder.replaceChildren(
    h("p", { class: "muted" }, `a sample every ${m.intervalS} s, the last ${Math.round(m.historyS / 60)} minutes ` +
      `(${m.samples} samples taken)`),
    h("div", { class: "charts" },
      lineChart("Messages in per second", seriesOf(m.brokers, (b) => b.label, 1)),
      lineChart("Messages out per second", seriesOf(m.brokers, (b) => b.label, 2)),
      lineChart("Consumer lag (messages)", seriesOf(mostBehind(m.groups), (g) => g.group, 1)),
      lineChart("CommitLog disk used (%)", m.brokers.map((b) => ({ label: b.label,
        points: b.points.map((p) => [p[0], p[3] * 100]) })))));
}

export async function render({ onLeave }) {
  const holder = h("div", { id: "charts" });
  const first = await api("GET", "/api/metrics");
  draw(holder, first);
  const timer = setInterval(async () => {
    try {
      draw(holder, await api("GET", "/api/metrics"));
    } catch (err) {
      /* the next refresh tries again */
    }
  }, Math.max(1000, first.intervalS * 1000));
  onLeave(() => clearInterval(timer));
  return h("div", {}, h("h1", {}, "Charts"), holder);
}
