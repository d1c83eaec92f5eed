// A PLC from another stack (node-opcua) reading what it missed from the bridge's event history.
//
// usage: node history_client.js <endpoint> <camera>
// Loads the data types, then HistoryRead (ReadEventDetails, the last hour) of the CrossingEvents of
// Objects/BeltSight and of <camera>'s VisionSystemType ResultReadyEvents; prints one JSON line
// {"crossings": [{"track", "message"}], "results": [{"resultId", "partId"}]}.
"use strict";
const {
  OPCUAClient,
  TimestampsToReturn,
  constructEventFilter,
  resolveNodeId,
  makeBrowsePath,
  HistoryReadRequest,
  ReadEventDetails,
  promoteOpaqueStructure,
} = require("node-opcua-client");

const MV_URI = "http://opcfoundation.org/UA/MachineVision";
const [endpoint, camera] = process.argv.slice(2);

async function nodeAt(session, path, from = "ObjectsFolder") {
  const result = await session.translateBrowsePath(makeBrowsePath(from, path));
  if (!result.targets || result.targets.length === 0) throw new Error(`no node at ${path}`);
  return result.targets[0].targetId;
}

async function history(session, nodeId, fields, eventType) {
  const filter = constructEventFilter(fields, [resolveNodeId(eventType)]);
  const now = Date.now();
  const response = await session.historyRead(
    new HistoryReadRequest({
      historyReadDetails: new ReadEventDetails({
        startTime: new Date(now - 3600 * 1000),
        endTime: new Date(now + 60 * 1000),
        numValuesPerNode: 0,
        filter,
      }),
      nodesToRead: [{ nodeId }],
      timestampsToReturn: TimestampsToReturn.Neither,
      releaseContinuationPoints: false,
    }),
  );
  const result = response.results[0];
  if (!result.statusCode.isGood()) throw new Error(`HistoryRead: ${result.statusCode.toString()}`);
  const events = result.historyData.events || [];
  // HistoryRead answers are not decoded with the server's types as subscriptions are: do it here
  await promoteOpaqueStructure(session, events.flatMap((e) => e.eventFields.map((value) => ({ value }))));
  return events.map((e) => e.eventFields.map((f) => f.value));
}

function u64(v) {
  return Array.isArray(v) ? v[0] * 2 ** 32 + v[1] : Number(v);
}

async function main() {
  const client = OPCUAClient.create({ endpointMustExist: false, connectionStrategy: { maxRetry: 3 } });
  await client.connect(endpoint);
  const session = await client.createSession();
  await session.extractNamespaceDataType();
  const namespaces = await session.readNamespaceArray();
  const mv = namespaces.indexOf(MV_URI);
  const bs = namespaces.indexOf("urn:beltsight");
  const crossingType = await nodeAt(session, `/${bs}:CrossingEventType`, "i=2041");
  const crossings = await history(session, await nodeAt(session, `/${bs}:BeltSight`), [`${bs}:Track`, "Message"], crossingType.toString());
  const source = await nodeAt(session, `/${bs}:BeltSight/${bs}:MachineVision/${bs}:${camera}`);
  const results = await history(session, source, [`${mv}:ResultId`, `${mv}:PartId`], `ns=${mv};i=1024`);
  console.log(
    JSON.stringify({
      crossings: crossings.map(([track, message]) => ({ track: u64(track), message: message.text })),
      results: results.map(([resultId, partId]) => ({ resultId: resultId.id, partId: partId.id })),
    }),
  );
  await session.close();
  await client.disconnect();
}

main().catch((err) => {
  console.log(JSON.stringify({ error: String(err && err.stack ? err.stack : err) }));
  process.exit(1);
});
