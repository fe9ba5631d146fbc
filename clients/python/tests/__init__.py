# The unit tests of the tracebridge Python client: python3 -m unittest (from
# clients/python). Drop reports at exit would only be noise here.
import tracebridge

tracebridge.configure(report_drops=False)
