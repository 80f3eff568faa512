// Reports in the workspace: the contact centre now (live, from `report` frames) and a period's
// numbers as small SVG charts drawn here (no chart library, no build step), each with its data as a
// table for screen readers and as CSV. Managers see everyone; an agent sees their own numbers.

const svgNS = "http://www.w3.org/2000/svg";
const element = (tag, properties = {}, ...children) => {
  const node = Object.assign(document.createElement(tag), properties);
  node.append(...children);
  return node;
};
const svg = (tag, attributes = {}, ...children) => {
  const node = document.createElementNS(svgNS, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  node.append(...children);
  return node;
};

const duration = (seconds) => {
  if (seconds == null) return "—";
  if (seconds < 60) return `${seconds} s`;
  if (seconds < 3600) return `${Math.round(seconds / 60)} min`;
  return `${(seconds / 3600).toFixed(seconds < 36_000 ? 1 : 0)} h`;
};

/** The charts: which numbers, how they read, and the CSV columns they come from (`chart`). */
const charts = [
  { id: "volume", title: "Conversations", series: [["newConversations", "New"], ["resolved", "Resolved"]], format: (v) => String(v) },
  { id: "response", title: "First response", series: [["firstResponseMedianSeconds", "Median"], ["firstResponseP90Seconds", "90th percentile"]], format: duration },
  { id: "resolution", csv: "response", title: "Time to resolve", series: [["resolutionMedianSeconds", "Median"], ["resolutionP90Seconds", "90th percentile"]], format: duration },
  { id: "csat", title: "Satisfaction", series: [["csatAverage", "Average rating (of 5)"]], format: (v) => (v == null ? "—" : v.toFixed(1)), max: 5, note: (row) => `${row.ratings} rating${row.ratings === 1 ? "" : "s"}` },
  { id: "voice", title: "Voice notes", series: [["voiceNotesIn", "From customers"], ["voiceNotesOut", "From agents"]], format: (v) => String(v) },
  { id: "calls", title: "Calls", series: [["calls", "Calls"], ["callMinutes", "Minutes"]], format: (v) => String(v) },
];

/**
 * A grouped bar chart: one group of bars per row (a day, an agent...), one bar per series, the
 * largest value at the top. Values are also in each bar's title (hover) and in the data table.
 */
export function barChart(rows, chart) {
  const width = Math.max(320, rows.length * (chart.series.length * 14 + 12) + 48);
  const height = 180;
  const top = 12, bottom = 34, left = 40;
  const values = rows.flatMap((row) => chart.series.map(([key]) => row[key] ?? 0));
  const max = chart.max ?? Math.max(1, ...values);
  const plot = height - top - bottom;
  const step = (width - left - 8) / Math.max(1, rows.length);
  const barWidth = Math.min(28, (step - 8) / chart.series.length);
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart", role: "img", "aria-label": `${chart.title}, by ${rows.length} groups` });
  for (const fraction of [0, 0.5, 1]) {
    const y = top + plot * (1 - fraction);
    // Counts are whole; a scale of ratings keeps its fractions.
    const tick = chart.max ? max * fraction : Math.round(max * fraction);
    root.append(svg("line", { x1: left, x2: width - 4, y1: y, y2: y, class: "grid" }),
      svg("text", { x: left - 6, y: y + 4, class: "axis", "text-anchor": "end" }, chart.format(tick)));
  }
  rows.forEach((row, index) => {
    const x0 = left + index * step + (step - barWidth * chart.series.length) / 2;
    chart.series.forEach(([key, label], serie) => {
      const value = row[key] ?? 0;
      const barHeight = Math.max(value ? 2 : 0, (value / max) * plot);
      root.append(svg("rect", {
        x: x0 + serie * barWidth, y: top + plot - barHeight, width: Math.max(2, barWidth - 2), height: barHeight, rx: 2, class: `bar s${serie}`,
      }, svg("title", {}, `${row.label}: ${label} ${chart.format(row[key])}`)));
    });
    // Days read as "24 Nov"; names are cut to fit.
    const text = /^\d{4}-\d{2}-\d{2}$/.test(row.key)
      ? new Date(`${row.key}T12:00:00Z`).toLocaleDateString(undefined, { day: "numeric", month: "short", timeZone: "UTC" })
      : row.label.length > 10 ? `${row.label.slice(0, 9)}…` : row.label;
    if (rows.length <= 16 || index % Math.ceil(rows.length / 16) === 0) {
      root.append(svg("text", { x: left + index * step + step / 2, y: height - bottom + 16, class: "axis", "text-anchor": "middle" }, text));
    }
  });
  return root;
}

export class Reports {
  constructor({ dialog, api, me }) {
    Object.assign(this, { dialog, api, me });
    this.form = dialog.querySelector(".report-form");
    this.liveElement = dialog.querySelector(".live");
    this.chartsElement = dialog.querySelector(".charts");
    this.form.addEventListener("change", () => this.load());
    this.form.addEventListener("submit", (event) => { event.preventDefault(); this.load(); });
    this.form.elements.period.addEventListener("change", () => this.fillDates());
    for (const name of ["from", "to"]) this.form.elements[name].addEventListener("input", () => { this.form.elements.period.value = "custom"; });
    setInterval(() => this.tick(), 1000);
  }

  async open() {
    this.dialog.showModal();
    const manager = ["manager", "admin"].includes(this.me().role);
    this.dialog.querySelector(".report-scope").textContent = manager ? "Everyone in your brand." : "Your own numbers.";
    this.dialog.querySelector(".transcripts").hidden = !manager;
    this.dialog.querySelector(".group-by").hidden = !manager;
    if (!this.form.elements.from.value) this.fillDates();
    this.live(await this.api.get("/v1/reports/live"));
    await this.load();
  }

  /** The period's first and last day for a chosen period (the last 7 or 30 days, this month). */
  fillDates() {
    const period = this.form.elements.period.value;
    if (period === "custom") return;
    const today = new Date();
    const iso = (date) => date.toISOString().slice(0, 10);
    const from = new Date(today);
    if (period === "month") from.setDate(1);
    else from.setDate(today.getDate() - (Number(period) - 1));
    this.form.elements.from.value = iso(from);
    this.form.elements.to.value = iso(today);
  }

  query(extra = {}) {
    const data = new FormData(this.form);
    const query = new URLSearchParams({ from: data.get("from"), to: data.get("to"), groupBy: data.get("groupBy") || "day", ...extra });
    if (data.get("channel")) query.set("channel", data.get("channel"));
    return query;
  }

  async load() {
    const note = this.dialog.querySelector(".report-note");
    try {
      const report = await this.api.get(`/v1/reports?${this.query()}`);
      note.textContent = "";
      this.render(report);
    } catch (error) {
      note.textContent = error.message;
    }
    for (const link of this.dialog.querySelectorAll(".transcripts a")) {
      const data = new FormData(this.form);
      link.href = `/v1/transcripts?${new URLSearchParams({ from: data.get("from"), to: data.get("to"), format: link.dataset.format })}`;
    }
  }

  render(report) {
    const total = report.total;
    this.dialog.querySelector(".totals").replaceChildren(...[
      ["New conversations", total.newConversations], ["Resolved", total.resolved],
      ["First response (median)", duration(total.firstResponseMedianSeconds)],
      ["Satisfaction", total.csatAverage == null ? "—" : `${total.csatAverage.toFixed(1)} of 5`],
      ["Voice notes", total.voiceNotesIn + total.voiceNotesOut], ["Calls", total.calls],
      ...(total.transcribedSeconds ? [["Transcribed minutes", (total.transcribedSeconds / 60).toFixed(1)]] : []),
    ].map(([label, value]) => element("div", { className: "tile" }, element("span", { className: "tile-value", textContent: value }), element("span", { className: "tile-label", textContent: label }))));
    this.chartsElement.replaceChildren(...charts.map((chart) => {
      const csv = element("a", { className: "button small", textContent: "CSV", href: `/v1/reports?${this.query({ format: "csv", chart: chart.csv ?? chart.id })}`, download: "" });
      csv.setAttribute("aria-label", `Download the data of “${chart.title}” as CSV`);
      const legend = element("ul", { className: "legend" }, ...chart.series.map(([, label], serie) =>
        element("li", {}, element("span", { className: `swatch s${serie}` }), label)));
      const table = element("table", { className: "sr-only" },
        element("caption", { textContent: chart.title }),
        element("tr", {}, element("th", { textContent: report.groupBy }), ...chart.series.map(([, label]) => element("th", { textContent: label }))),
        ...report.rows.map((row) => element("tr", {}, element("th", { textContent: row.label }),
          ...chart.series.map(([key]) => element("td", { textContent: chart.format(row[key]) })))));
      const empty = report.rows.every((row) => chart.series.every(([key]) => !row[key]));
      const summary = chart.note ? element("p", { className: "chart-note", textContent: chart.note(total) }) : "";
      return element("figure", { className: "chart-card" },
        element("figcaption", {}, element("h4", { textContent: chart.title }), csv),
        empty ? element("p", { className: "chart-empty", textContent: "Nothing in this period." }) : barChart(report.rows, chart),
        legend, summary, table);
    }));
  }

  /** A `report` frame (or the first load): the tiles and each agent's load. */
  live(report) {
    this.now = report;
    this.receivedAt = Date.now();
    const tiles = [["Waiting", report.waiting, "waiting"], ["Oldest wait", duration(report.oldestWaitSeconds), "oldest"],
      ["Online", report.online, "online"], ["Away", report.away, "away"], ["Offline", report.offline, "offline"]];
    this.liveElement.querySelector(".live-tiles").replaceChildren(...tiles.map(([label, value, kind]) =>
      element("div", { className: `tile ${kind}` }, element("span", { className: "tile-value", textContent: value }), element("span", { className: "tile-label", textContent: label }))));
    this.liveElement.querySelector(".live-agents").replaceChildren(...report.agents.map((agent) => {
      const meter = element("meter", { min: 0, max: agent.maxConversations, value: agent.openConversations });
      meter.setAttribute("aria-label", `${agent.name}: ${agent.openConversations} of ${agent.maxConversations}`);
      return element("tr", {},
        element("th", { scope: "row", textContent: agent.name }),
        element("td", {}, element("span", { className: `presence-dot ${agent.presence}` }), agent.presence[0].toUpperCase() + agent.presence.slice(1)),
        element("td", {}, meter, ` ${agent.openConversations} of ${agent.maxConversations}`));
    }));
  }

  /** The oldest wait counts on between frames. */
  tick() {
    if (!this.dialog.open || this.now?.oldestWaitSeconds == null) return;
    const seconds = this.now.oldestWaitSeconds + Math.round((Date.now() - this.receivedAt) / 1000);
    const tile = this.liveElement.querySelector(".tile.oldest .tile-value");
    if (tile) tile.textContent = duration(seconds);
  }
}
