#!/bin/sh
# PostgreSQL's first start in deploy/compose.yaml (docker-entrypoint-initdb.d): a role per service schema,
# with the passwords of deploy/.env (service-roles.sql says what each role may do).
psql --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -v identity_password="$DATABASE_PASSWORD_IDENTITY" \
  -v notification_password="$DATABASE_PASSWORD_NOTIFICATION" \
  -v billing_password="$DATABASE_PASSWORD_BILLING" \
  -v enrollment_password="$DATABASE_PASSWORD_ENROLLMENT" \
  -f /etc/sts/service-roles.sql
