// Package protocoltest holds the robot protocols' end-to-end tests: the
// real pipeline (core/processor, the DROID and LIBERO wasm plugins, the
// CPU backend on the n17-tiny checkpoint) behind one gateway, served at
// once over HTTP /predict, the Open Inference Protocol v2 (frontend/oip),
// the Isaac-GR00T ZeroMQ endpoint and the openpi
// websocket endpoint, driven by the Go clients (client/zmqclient,
// client/openpiclient) and by Python clients written from the wire
// facts (testdata/gr00t_zmq_client.py, testdata/openpi_client.py; run when
// Debian's python3-zmq, python3-msgpack, python3-numpy and
// python3-websockets are installed, skipped otherwise). The package has no
// code of its own.
package protocoltest
