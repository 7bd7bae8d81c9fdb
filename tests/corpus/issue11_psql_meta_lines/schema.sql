\restrict AbCdEf0123456789
CREATE TABLE public.things (id integer NOT NULL, label text);
\unrestrict AbCdEf0123456789
