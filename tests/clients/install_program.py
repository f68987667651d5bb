"""One transaction end to end with the txhub package as pip installed it
(install_test.sh; what docs/producers.md: Producing from Python promises).
Environment: TXHUB_BROKERS, CONTROL_TOPIC, FORWARD_TOPIC, MESSAGE_KEY, VENV."""
import os
import sys

import txhub
from txhub import Message, Producer

if not txhub.__file__.startswith(os.environ["VENV"]):
    sys.exit(f"txhub was imported from {txhub.__file__}, not from the installed package")
key = os.environ["MESSAGE_KEY"]
with Producer(os.environ["TXHUB_BROKERS"], control_topic=os.environ["CONTROL_TOPIC"]) as p:
    p.prepare(Message("installed", key, payload="from Python", forward_topic=os.environ["FORWARD_TOPIC"]))
    p.commit("installed", key)
print(f"txhub {txhub.__version__} from {os.path.dirname(txhub.__file__)}: prepared and committed {key}")
