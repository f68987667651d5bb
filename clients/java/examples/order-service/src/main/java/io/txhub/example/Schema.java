package io.txhub.example;

import org.springframework.beans.factory.InitializingBean;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.stereotype.Component;

/** The service's tables (a real service has migrations). */
@Component
public class Schema implements InitializingBean {
	private final JdbcTemplate jdbc;

	public Schema(JdbcTemplate jdbc) {
		this.jdbc = jdbc;
	}

	@Override
	public void afterPropertiesSet() {
		jdbc.execute("CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY, amount numeric NOT NULL)");
		// what became of each order's transaction, for the check-back: see BarrierResolver
		jdbc.execute("CREATE TABLE IF NOT EXISTS txhub_barrier (message_key text PRIMARY KEY, "
			+ "outcome text NOT NULL CHECK (outcome IN ('committed', 'rolled_back')))");
	}
}
