CREATE TYPE mood AS ENUM ('calm', 'busy');
DROP DOMAIN mood;
