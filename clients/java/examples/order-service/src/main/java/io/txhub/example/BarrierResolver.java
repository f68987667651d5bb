package io.txhub.example;

import io.txhub.Checkback;
import io.txhub.spring.TxhubCheckbackResolver;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.stereotype.Component;

/**
 * Answers the hub's check-back from the database, truthfully: it records "rolled_back" for the
 * order unless its transaction's "committed" row is there (waiting for a transaction in flight on
 * the same key), so a transaction that has not committed by then never can (its own barrier
 * insert fails). A message the service never prepared is answered rolled_back the same way.
 */
@Component
public class BarrierResolver implements TxhubCheckbackResolver {
	private final JdbcTemplate jdbc;
	private final String bizId;

	public BarrierResolver(JdbcTemplate jdbc, @Value("${txhub.biz-id}") String bizId) {
		this.jdbc = jdbc;
		this.bizId = bizId;
	}

	@Override
	public Checkback.Outcome resolve(Checkback.Request request) {
		if (!request.bizId().equals(bizId))
			throw new IllegalArgumentException("not our business line: " + request.bizId()); // answered 503
		jdbc.update("INSERT INTO txhub_barrier (message_key, outcome) VALUES (?, 'rolled_back') ON CONFLICT (message_key) DO NOTHING",
			request.messageKey());
		String outcome = jdbc.queryForObject("SELECT outcome FROM txhub_barrier WHERE message_key = ?", String.class, request.messageKey());
		return "committed".equals(outcome) ? Checkback.Outcome.COMMITTED : Checkback.Outcome.ROLLED_BACK;
	}
}
