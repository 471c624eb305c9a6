// Line charts as inline SVG: time on x, one polyline and its points per series, a legend. No library.

const SVG = "http://www.w3.org/2000/svg";
const COLORS = ["#2f6fde", "#d9534f", "#3a9d5d", "#e6a23c", "#8e44ad", "#16a2b8", "#7f8c8d", "#c0392b"];
const WIDTH = 640, HEIGHT = 220, LEFT = 56, RIGHT = 12, TOP = 14, BOTTOM = 28;

function svg(tag, attrs = {}, text) {
  const el = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) el.setAttribute(key, value);
  if (text !== undefined) el.textContent = text;
  return el;
}

// The smallest 1, 2 or 5 times a power of ten at or above `value`: the top of the y axis.
function niceCeil(value) {
  const power = 10 ** Math.floor(Math.log10(value));
  return [1, 2, 5, 10].map((m) => m * power).find((step) => step >= value);
}

function clock(ms) {
  return new Date(ms).toTimeString().slice(0, 8);
}

function shortNumber(value) {
  if (Math.abs(value) >= 1e6) return `${(value / 1e6).toFixed(1)}M`;
  if (Math.abs(value) >= 1e3) return `${(value / 1e3).toFixed(1)}k`;
  return Number.isInteger(value) ? String(value) : value.toFixed(2);
}

// series: [{label, points: [[timeMs, value], ...]}]; returns a <figure> holding the SVG and its legend.
export function lineChart(title, series, format = shortNumber) {
  const all = series.flatMap((s) => s.points);
  const figure = document.createElement("figure");
  figure.className = "chart";
  figure.dataset.points = String(all.length);
  const caption = document.createElement("figcaption");
  caption.textContent = title;
  figure.append(caption);
  const root = svg("svg", { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "img", "aria-label": title });
  figure.append(root);
  if (!all.length) {
    root.append(svg("text", { x: WIDTH / 2, y: HEIGHT / 2, "text-anchor": "middle", class: "muted" }, "no samples yet"));
    return figure;
  }
  const times = all.map((p) => p[0]);
  const values = all.map((p) => p[1]);
  let [t0, t1] = [Math.min(...times), Math.max(...times)];
  if (t1 === t0) { t0 -= 1000; t1 += 1000; }
  const top = Math.max(...values, 0);
  const y1 = top > 0 ? niceCeil(top * 1.05) : 1;
  const x = (t) => LEFT + ((t - t0) / (t1 - t0)) * (WIDTH - LEFT - RIGHT);
  const y = (v) => HEIGHT - BOTTOM - (v / y1) * (HEIGHT - TOP - BOTTOM);

  for (const fraction of [0, 0.5, 1]) {
    const value = y1 * fraction;
    root.append(svg("line", { x1: LEFT, x2: WIDTH - RIGHT, y1: y(value), y2: y(value), class: "grid" }));
    root.append(svg("text", { x: LEFT - 6, y: y(value) + 4, "text-anchor": "end", class: "axis" }, format(value)));
  }
  root.append(svg("text", { x: LEFT, y: HEIGHT - 8, class: "axis" }, clock(t0)));
  root.append(svg("text", { x: WIDTH - RIGHT, y: HEIGHT - 8, "text-anchor": "end", class: "axis" }, clock(t1)));

  const legend = document.createElement("div");
  legend.className = "legend";
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    const path = s.points.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" ");
    root.append(svg("polyline", { points: path, fill: "none", stroke: color, "stroke-width": 2, class: "series" }));
    for (const p of s.points) {
      const dot = svg("circle", { cx: x(p[0]), cy: y(p[1]), r: 2.5, fill: color, class: "pt" });
      dot.append(svg("title", {}, `${s.label} ${clock(p[0])}: ${format(p[1])}`));
      root.append(dot);
    }
    const key = document.createElement("span");
    key.innerHTML = `<i style="background:${color}"></i>`;
    key.append(s.label);
    legend.append(key);
  });
  figure.append(legend);
  return figure;
}
