"""A PLC simulator for the reconciliation rig (#57): a counter that follows a belt's ground truth.

`scene` says when each part crosses the camera's line and the photo-eye (a stop-and-go belt, seeded);
`counter` is the PLC's counter over time with the faults to inject (missed parts, double pulses, a
reset, a wrap, the PLC gone); `servers` serve that counter over Modbus TCP (pymodbus) and OPC UA
(asyncua) as a real PLC would. Run one: `python -m tools.plcsim --help`.
"""
