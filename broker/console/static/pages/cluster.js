// The cluster: each broker's role, address, version, TPS, disk and replication; a broker's runtime table on click.

import { api, badge, enc, fmtNum, h, section, table } from "../lib.js";

function replication(r) {
  if (!r) return "";
  if (r.master) {
    if (!r.slaves.length) return "master, no slave";
    return r.slaves.map((s) => `${s.addr}: ${fmtNum(s.behindBytes)} B behind${s.inSync ? ", in sync" : ""}`).join("; ");
  }
  return `slave of ${r.masterAddr || "?"}, at ${fmtNum(r.maxOffset)}`;
}

async function showRuntime(addr, holder) {
  holder.replaceChildren(h("p", { class: "muted" }, "loading..."));
  const status = await api("GET", `/api/brokers/${enc(addr)}`);
  holder.replaceChildren(section(`Runtime of ${addr}`,
    table([["Key", (r) => r[0]], ["Value", (r) => h("span", { class: "mono" }, r[1])]], Object.entries(status.runtime),
      { id: "runtime" })));
}

export async function render() {
  const data = await api("GET", "/api/cluster");
  const brokers = data.brokers;
  const total = (key) => brokers.reduce((sum, b) => sum + (b[key] || 0), 0);
  const holder = h("div");
  const cards = h("div", { class: "cards" },
    h("div", { class: "card" }, h("b", {}, data.clusters.length), h("span", {}, "clusters")),
    h("div", { class: "card" }, h("b", {}, brokers.length), h("span", {}, "brokers")),
    h("div", { class: "card" }, h("b", {}, fmtNum(total("inTps"), 1)), h("span", {}, "messages in / s")),
    h("div", { class: "card" }, h("b", {}, fmtNum(total("outTps"), 1)), h("span", {}, "messages out / s")),
    h("div", { class: "card" }, h("b", {}, fmtNum(total("inToday"))), h("span", {}, "messages in today")));
  const rows = table([
    ["Cluster", (b) => b.cluster],
    ["Broker", (b) => b.brokerName],
    ["ID", (b) => b.brokerId],
    ["Role", (b) => badge(b.role, b.role === "MASTER" ? "ok" : "")],
    ["Address", (b) => h("a", { href: "#", class: "mono", onclick: (e) => { e.preventDefault(); showRuntime(b.addr, holder); } },
      b.addr)],
    ["Version", (b) => b.reachable ? b.version : badge("unreachable", "bad")],
    ["TPS in", (b) => fmtNum(b.inTps, 2)],
    ["TPS out", (b) => fmtNum(b.outTps, 2)],
    ["In today", (b) => fmtNum(b.inToday)],
    ["Out today", (b) => fmtNum(b.outToday)],
    ["Disk used", (b) => b.reachable ? `${(b.diskRatio * 100).toFixed(1)} %` : ""],
    ["Disk", (b) => b.diskCapacity || ""],
    ["Hours kept", (b) => b.hoursKept === null ? "" : fmtNum(b.hoursKept, 2)],
    ["Replication", (b) => replication(b.replication)],
  ], brokers, { id: "brokers" });
  return h("div", {}, h("h1", {}, "Cluster"), cards, section("Brokers", rows), holder);
}
