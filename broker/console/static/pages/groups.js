// Every consumer group: members, type, lag; Spark queries that commit as a group are marked.

import { api, badge, enc, field, fmtNum, h, link, section, table } from "../lib.js";

export function stateBadge(g) {
  if (g.state === "ONLINE") return badge("online", "ok");
  if (g.state === "OFFSETS_ONLY") return badge("offline, offsets committed");
  return badge("no offsets", "bad");
}

export async function render({ query }) {
  const data = await api("GET", "/api/groups");
  const filter = h("input", { name: "q", placeholder: "filter by name", value: query.get("q") || "", id: "group-filter" });
  const sparkOnly = h("input", { type: "checkbox", id: "spark-only", checked: query.get("spark") === "true" });
  const holder = h("div");
  const draw = () => {
    const text = filter.value.toLowerCase();
    const rows = data.groups.filter((g) => g.group.toLowerCase().includes(text) && (!sparkOnly.checked || g.spark));
    holder.replaceChildren(table([
      ["Group", (g) => h("span", {}, link(`#/group/${enc(g.group)}`, g.group), g.spark ? " " : "",
        g.spark ? badge("Spark query", "spark") : "")],
      ["State", stateBadge], ["Members", (g) => g.members], ["Type", (g) => g.consumeType], ["Model", (g) => g.messageModel],
      ["Version", (g) => g.version], ["TPS", (g) => g.tps], ["Queues", (g) => g.queues], ["Lag", (g) => fmtNum(g.lag)],
    ], rows, { id: "groups" }));
  };
  filter.addEventListener("input", draw);
  sparkOnly.addEventListener("change", draw);
  draw();
  return h("div", {}, h("h1", {}, "Consumer groups"),
    section("Groups", h("div", { class: "toolbar" }, field("Name", filter),
      h("label", { class: "field check" }, sparkOnly, h("span", {}, "Spark queries only"))), holder),
    h("p", { class: "muted" }, "A Spark query that commits its offsets to a consumer group (the source's consumerGroup " +
      "option) is marked when its driver's client is or was seen online; between commits it shows as offline with " +
      "committed offsets."));
}
