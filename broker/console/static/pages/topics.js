// The topic list (filter by name and type) and the form that creates a topic on a cluster.

import { api, enc, field, form, h, link, section, table, toast } from "../lib.js";

export async function render({ query }) {
  const [listed, cluster] = await Promise.all([api("GET", "/api/topics"), api("GET", "/api/cluster")]);
  const filter = h("input", { name: "q", placeholder: "filter by name", value: query.get("q") || "", id: "topic-filter" });
  const type = h("select", { name: "type", id: "topic-type" },
    ["", "NORMAL", "RETRY", "DLQ", "SYSTEM"].map((t) => h("option", { value: t }, t || "all types")));
  type.value = query.get("type") || "";
  const holder = h("div");
  const draw = () => {
    const text = filter.value.toLowerCase();
    const rows = listed.topics.filter((t) => t.topic.toLowerCase().includes(text) && (!type.value || t.type === type.value));
    holder.replaceChildren(h("p", { class: "muted" }, `${rows.length} of ${listed.topics.length} topics`),
      table([["Topic", (t) => link(`#/topic/${enc(t.topic)}`, t.topic)], ["Type", (t) => t.type]], rows, { id: "topics" }));
  };
  filter.addEventListener("input", draw);
  type.addEventListener("change", draw);
  draw();

  const create = form({ id: "create-topic" }, [
    field("Topic", h("input", { name: "topic", required: true })),
    field("Cluster", h("select", { name: "cluster" }, cluster.clusters.map((c) => h("option", { value: c }, c)))),
    field("Read queues", h("input", { name: "readQueueNums", type: "number", min: 1, value: 4 })),
    field("Write queues", h("input", { name: "writeQueueNums", type: "number", min: 1, value: 4 })),
    field("Permission", h("select", { name: "perm" }, [["6", "read and write"], ["4", "read"], ["2", "write"]]
      .map(([v, t]) => h("option", { value: v }, t)))),
    h("label", { class: "field check" }, h("input", { type: "checkbox", name: "order" }), h("span", {}, "ordered")),
  ], "Create", async (values) => {
    const made = await api("POST", "/api/topics", { ...values, readQueueNums: Number(values.readQueueNums),
      writeQueueNums: Number(values.writeQueueNums), perm: Number(values.perm) });
    toast(`topic ${made.topic} created on ${made.brokers.join(", ")}`);
    location.hash = `#/topic/${enc(made.topic)}`;
  });
  return h("div", {}, h("h1", {}, "Topics"),
    section("Create a topic", create),
    section("Topics", h("div", { class: "toolbar" }, field("Name", filter), field("Type", type)), holder));
}
