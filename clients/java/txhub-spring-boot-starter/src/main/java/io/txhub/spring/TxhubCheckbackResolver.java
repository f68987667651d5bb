package io.txhub.spring;

import io.txhub.Checkback;

/**
 * The application's answer to the hub's check-back, from its own database: define one bean of
 * this type and the starter maps the endpoint ({@code txhub.checkback.path}). Return
 * {@code COMMITTED} only when the local transaction that sent the prepare committed,
 * {@code ROLLED_BACK} when it did not and never can, {@code UNKNOWN} when it may still; throw
 * when the database cannot tell now (the hub asks again later).
 */
@FunctionalInterface
public interface TxhubCheckbackResolver extends Checkback.Resolver {
}
