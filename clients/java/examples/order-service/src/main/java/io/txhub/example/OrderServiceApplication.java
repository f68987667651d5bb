package io.txhub.example;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;

/**
 * An order service on txhub with the Spring Boot starter: the producer's side to copy.
 *
 * <p>Placing an order ({@link OrderService#place}) is one {@code @Transactional} method: the
 * order row and its {@code txhub_barrier} row, and {@code TxhubTemplate.send}, which sends the
 * prepare before the transaction commits; the starter sends the commit or rollback after it. If
 * the service dies in between, the hub asks the check-back endpoint, which the starter maps and
 * {@link BarrierResolver} answers from the database, never guessing.
 */
@SpringBootApplication
public class OrderServiceApplication {
	public static void main(String[] args) {
		SpringApplication.run(OrderServiceApplication.class, args);
	}
}
