// A PLC from another stack (node-opcua) timing the bridge's events: how long after its XADD each arrives.
//
// usage: node event_times.js <endpoint> <camera> [lazy]
// Loads the server's data types when the session opens (what a PLC does when it is configured: node-opcua
// otherwise crawls the server's whole type system, hundreds of requests, when the first event with a
// Machine Vision structure arrives, and holds that event and the ones behind it until it is done; `lazy`
// keeps node-opcua's default, to show that). Subscribes, at a 10 ms publishing interval, to <camera>'s
// ResultReadyEvents and to the CrossingEvents of Objects/BeltSight; prints {"ready": true}, then one JSON
// line per event: {"kind": "result"|"crossing", "part": "<track>", "t": <Unix ms when it arrived>}.
// Runs until killed.
"use strict";
const {
  OPCUAClient,
  AttributeIds,
  TimestampsToReturn,
  constructEventFilter,
  resolveNodeId,
  makeBrowsePath,
} = require("node-opcua-client");
const { performance } = require("perf_hooks");

const MV_URI = "http://opcfoundation.org/UA/MachineVision";
const [endpoint, camera, mode] = process.argv.slice(2);

async function nodeAt(session, path) {
  const result = await session.translateBrowsePath(makeBrowsePath("ObjectsFolder", path));
  if (!result.targets || result.targets.length === 0) throw new Error(`no node at ${path}`);
  return result.targets[0].targetId;
}

function now() {
  return performance.timeOrigin + performance.now();
}

async function main() {
  const client = OPCUAClient.create({ endpointMustExist: false, connectionStrategy: { maxRetry: 3 } });
  await client.connect(endpoint);
  const session = await client.createSession();
  if (mode !== "lazy") await session.extractNamespaceDataType();
  const namespaces = await session.readNamespaceArray();
  const mv = namespaces.indexOf(MV_URI);
  const bs = namespaces.indexOf("urn:beltsight");
  const subscription = await session.createSubscription2({
    requestedPublishingInterval: 10,
    requestedMaxKeepAliveCount: 20,
    requestedLifetimeCount: 600,
    publishingEnabled: true,
  });
  const watch = async (kind, source, field, eventType) => {
    const filter = constructEventFilter([field], [resolveNodeId(eventType)]);
    const item = await subscription.monitor(
      { nodeId: source, attributeId: AttributeIds.EventNotifier },
      { queueSize: 10000, filter, discardOldest: false },
      TimestampsToReturn.Neither,
    );
    item.on("changed", (fields) => {
      const v = fields[0].value;
      const part = Array.isArray(v) ? v[0] * 2 ** 32 + v[1] : v && typeof v === "object" && "id" in v ? v.id : String(v);
      console.log(JSON.stringify({ kind, part, t: now() }));
    });
  };
  await watch("result", await nodeAt(session, `/${bs}:BeltSight/${bs}:MachineVision/${bs}:${camera}`), `${mv}:PartId`, `ns=${mv};i=1024`);
  const types = await session.translateBrowsePath(makeBrowsePath("i=2041", `/${bs}:CrossingEventType`));
  await watch("crossing", await nodeAt(session, `/${bs}:BeltSight`), `${bs}:Track`, types.targets[0].targetId.toString());
  console.log(JSON.stringify({ ready: true }));
  await new Promise(() => {});
}

main().catch((err) => {
  console.log(JSON.stringify({ error: String(err && err.stack ? err.stack : err) }));
  process.exit(1);
});
