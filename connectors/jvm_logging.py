"""The one log4j2 configuration of every JVM the product starts (a classic Spark session's driver) and the local
stack's servers (Kafka, Pulsar, Spark): warnings and errors only, one line each."""

from pathlib import Path

LOG4J2_CONFIG = Path(__file__).with_name("log4j2.properties")
