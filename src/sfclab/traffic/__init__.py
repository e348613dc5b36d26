"""Measurement: iperf3 and native-generator drivers, the NDR/PDR search, latency, CPU."""
