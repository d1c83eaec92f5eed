// A minimal Sparkplug B host for the tests, decoding with Eclipse Tahu's sparkplug-payload (not the
// bridge's pysparkplug) over MQTT.js. Subscribes to spBv1.0/# and beltsight/#, prints one JSON line
// per message: {"topic", "payload"} (payload decoded; Long values as numbers; JSON topics and STATE
// as parsed JSON). Prints {"ready": true} once subscribed. With PRIMARY_HOST_ID set it is a Sparkplug 3.0
// primary host: after each (re)subscription it publishes a retained spBv1.0/STATE/<id>
// {"online": true, "timestamp": t}, with {"online": false} and the same t as its will (a new t for
// each connection, as Sparkplug 3.0 asks). Each stdin line `{"rebirth": "<NCMD topic>"}`
// publishes a `Node Control/Rebirth` = true NCMD there.
//
//   node sparkplug_host.js <broker url> [ca.pem client.pem client.key]
"use strict";

const fs = require("fs");
const readline = require("readline");
const mqtt = require("mqtt");
const sparkplug = require("sparkplug-payload").get("spBv1.0");

const [url, ca, cert, key] = process.argv.slice(2);
const options = { clientId: `tahu-host-${process.pid}`, reconnectPeriod: 200, connectTimeout: 5000, clean: true };
const hostId = process.env.PRIMARY_HOST_ID;
const stateTopic = hostId ? `spBv1.0/STATE/${hostId}` : null;
let sessionTs = Date.now();
function will() {
    return { topic: stateTopic, payload: JSON.stringify({ online: false, timestamp: sessionTs }), qos: 1, retain: true };
}
if (stateTopic) options.will = will();
if (ca) {
    options.ca = fs.readFileSync(ca);
    options.cert = fs.readFileSync(cert);
    options.key = fs.readFileSync(key);
    options.rejectUnauthorized = true;
}

function plain(value) {
    if (value !== null && typeof value === "object" && typeof value.toNumber === "function") {
        return value.toNumber();
    }
    if (Array.isArray(value)) return value.map(plain);
    if (value !== null && typeof value === "object" && !Buffer.isBuffer(value)) {
        const out = {};
        for (const [k, v] of Object.entries(value)) out[k] = plain(v);
        return out;
    }
    return value;
}

const client = mqtt.connect(url, options);
client.on("connect", () => {
    client.subscribe(["spBv1.0/#", "beltsight/#"], { qos: 1 }, (err) => {
        if (err) {
            process.stderr.write(`subscribe failed: ${err}\n`);
            process.exit(2);
        }
        if (stateTopic) {
            client.publish(stateTopic, JSON.stringify({ online: true, timestamp: sessionTs }), { qos: 1, retain: true });
        }
        process.stdout.write(JSON.stringify({ ready: true }) + "\n");
    });
});
client.on("reconnect", () => {
    if (stateTopic) {
        sessionTs = Math.max(Date.now(), sessionTs + 1);
        client.options.will = will();
    }
});
client.on("error", (err) => process.stderr.write(`mqtt error: ${err.message}\n`));
client.on("message", (topic, message) => {
    let payload;
    try {
        const sparkplugPayload = topic.startsWith("spBv1.0/") && !topic.startsWith("spBv1.0/STATE/");
        payload = sparkplugPayload ? plain(sparkplug.decodePayload(message)) : JSON.parse(message.toString());
    } catch (err) {
        payload = { undecodable: String(err) };
    }
    process.stdout.write(JSON.stringify({ topic, payload }) + "\n");
});

readline.createInterface({ input: process.stdin }).on("line", (line) => {
    const cmd = JSON.parse(line);
    if (cmd.rebirth) {
        const body = sparkplug.encodePayload({
            timestamp: Date.now(),
            metrics: [{ name: "Node Control/Rebirth", type: "Boolean", value: true }],
        });
        client.publish(cmd.rebirth, body, { qos: 0 });
    }
});
process.stdin.on("end", () => client.end(true, () => process.exit(0)));
