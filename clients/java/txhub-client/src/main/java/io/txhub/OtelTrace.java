package io.txhub;

import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.Context;
import java.util.HashMap;
import java.util.Map;

/** The current OpenTelemetry context as W3C headers; loaded only when the API is on the class path. */
final class OtelTrace {
	private OtelTrace() {
	}

	/** @return {traceparent, tracestate or null}, or null without a valid current span */
	static String[] current() {
		Map<String, String> carrier = new HashMap<>();
		W3CTraceContextPropagator.getInstance().inject(Context.current(), carrier, Map::put);
		String tp = carrier.get("traceparent");
		return tp == null ? null : new String[] {tp, carrier.get("tracestate")};
	}
}
