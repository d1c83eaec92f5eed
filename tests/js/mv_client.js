// An OPC UA client from another stack (node-opcua) against the bridge's Machine Vision objects.
//
// usage: node mv_client.js <endpoint> <camera> <events> <timeout_ms>
// Prints one JSON line {"ready": ...} once subscribed (browse results: the MachineVision folder's
// children and their type), then one JSON line {"events": [...]} after <events> ResultReadyEvents
// from <camera>'s VisionSystemType object, or after the timeout with those received so far.
"use strict";
const {
  OPCUAClient,
  AttributeIds,
  TimestampsToReturn,
  constructEventFilter,
  resolveNodeId,
  makeBrowsePath,
  BrowseDirection,
} = require("node-opcua-client");

const MV_URI = "http://opcfoundation.org/UA/MachineVision";
const [endpoint, camera, wanted, timeoutMs] = process.argv.slice(2);
const FIELDS = ["EventType", "SourceNode", "ResultId", "PartId", "ResultState", "IsPartial", "CreationTime", "ResultContent"];

function plain(variant) {
  const v = variant.value;
  if (v === null || v === undefined) return null;
  if (Array.isArray(v)) return v.map((x) => (x && x.value !== undefined ? x.value : x));
  if (v instanceof Date) return v.toISOString();
  if (typeof v === "object" && v.toString && v.constructor && v.constructor.name === "NodeId") return v.toString();
  if (typeof v === "object" && "id" in v) return { id: v.id, type: v.constructor.name };
  if (typeof v === "object" && v.toString) return v.toString();
  return v;
}

async function nodeAt(session, path) {
  const result = await session.translateBrowsePath(makeBrowsePath("ObjectsFolder", path));
  if (!result.targets || result.targets.length === 0) throw new Error(`no node at ${path}`);
  return result.targets[0].targetId;
}

async function main() {
  const client = OPCUAClient.create({ endpointMustExist: false, connectionStrategy: { maxRetry: 3 } });
  await client.connect(endpoint);
  const session = await client.createSession();
  const namespaces = (await session.readNamespaceArray());
  const mv = namespaces.indexOf(MV_URI);
  const bs = namespaces.indexOf("urn:beltsight");
  const folder = await nodeAt(session, `/${bs}:BeltSight/${bs}:MachineVision`);
  const browsed = await session.browse({
    nodeId: folder,
    referenceTypeId: "HierarchicalReferences",
    includeSubtypes: true,
    browseDirection: BrowseDirection.Forward,
    resultMask: 63,
  });
  const children = browsed.references.map((r) => ({
    name: r.browseName.name,
    type: r.typeDefinition.toString(),
  }));
  const typeNames = {};
  for (const child of browsed.references) {
    const typeId = resolveNodeId(`ns=${child.typeDefinition.namespace};i=${child.typeDefinition.value}`);
    const name = await session.read({ nodeId: typeId, attributeId: AttributeIds.BrowseName });
    const qname = name.value.value;
    typeNames[child.browseName.name] = qname ? `${qname.namespaceIndex === mv ? "mv" : "other"}:${qname.name}` : String(name.statusCode);
  }
  const source = await nodeAt(session, `/${bs}:BeltSight/${bs}:MachineVision/${bs}:${camera}`);
  const state = await session.read({
    nodeId: await nodeAt(session, `/${bs}:BeltSight/${bs}:MachineVision/${bs}:${camera}/${mv}:VisionStateMachine/0:CurrentState`),
    attributeId: AttributeIds.Value,
  });
  const subscription = await session.createSubscription2({
    requestedPublishingInterval: 10,
    requestedMaxKeepAliveCount: 20,
    requestedLifetimeCount: 600,
    publishingEnabled: true,
  });
  const eventType = resolveNodeId(`ns=${mv};i=1024`);
  const filter = constructEventFilter(FIELDS.map((f) => (f.startsWith("Result") || f === "PartId" || f === "IsPartial" || f === "CreationTime" ? `${mv}:${f}` : f)), [eventType]);
  const item = await subscription.monitor(
    { nodeId: source, attributeId: AttributeIds.EventNotifier },
    { queueSize: 10000, filter, discardOldest: false },
    TimestampsToReturn.Neither,
  );
  const events = [];
  let finish;
  const done = new Promise((resolve) => (finish = resolve));
  item.on("changed", (fields) => {
    const ev = {};
    FIELDS.forEach((name, i) => (ev[name] = plain(fields[i])));
    events.push(ev);
    if (events.length >= Number(wanted)) finish();
  });
  const timer = setTimeout(finish, Number(timeoutMs));
  console.log(JSON.stringify({ ready: true, children, typeNames, source: source.toString(), state: state.value.value.text }));
  await done;
  clearTimeout(timer);
  console.log(JSON.stringify({ events }));
  await subscription.terminate();
  await session.close();
  await client.disconnect();
}

main().catch((err) => {
  console.log(JSON.stringify({ error: String(err && err.stack ? err.stack : err) }));
  process.exit(1);
});
